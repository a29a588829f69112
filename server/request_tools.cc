#include "server/request_tools.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace pinfer::server {
namespace {

using json = request_json::json;
using request_json::Bad;
using request_json::GetBool;
using request_json::Has;

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::optional<ApiError> ParseTools(const json& tools, ParsedRequest* r) {
  if (!tools.is_array() || tools.size() > static_cast<size_t>(kMaxTools)) {
    return Bad("tools", absl::StrCat("tools must be an array of at most ", kMaxTools,
                                     " {\"type\": \"function\", \"function\": {...}}"));
  }
  std::set<std::string> names;
  for (const json& t : tools) {
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
        !t["function"].is_object()) {
      return Bad("tools", "each tool must be {\"type\": \"function\", \"function\": {...}}");
    }
    const json& f = t["function"];
    ToolSpec spec;
    spec.name = f.contains("name") && f["name"].is_string() ? f["name"].get<std::string>() : "";
    if (!ValidName(spec.name)) {
      return Bad("tools", "a function name must be 1 to 64 letters, digits, '_', '-' or '.'");
    }
    if (!names.insert(spec.name).second) {
      return Bad("tools", "two tools are named '" + spec.name + "'");
    }
    if (Has(f, "description")) {
      if (!f["description"].is_string()) return Bad("tools", "a description must be a string");
      spec.description = f["description"].get<std::string>();
    }
    if (Has(f, "parameters")) {
      if (!f["parameters"].is_object() && !f["parameters"].is_boolean()) {
        return Bad("tools", "function '" + spec.name + "': parameters must be a JSON schema");
      }
      spec.parameters = f["parameters"];
    }
    r->tool_specs.push_back(std::move(spec));
  }
  r->tools = tools;
  return std::nullopt;
}

std::optional<ApiError> ParseToolChoice(const json& j, ParsedRequest* r) {
  r->tool_choice = r->tool_specs.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (!Has(j, "tool_choice")) return std::nullopt;
  const json& c = j["tool_choice"];
  if (c == "none") {
    r->tool_choice = ToolChoice::kNone;
    return std::nullopt;
  }
  if (c == "auto" || c == "required") {
    r->tool_choice = c == "auto" ? ToolChoice::kAuto : ToolChoice::kRequired;
  } else if (c.is_object() && c.value("type", "") == "function" && c.contains("function") &&
             c["function"].is_object() && c["function"].contains("name") &&
             c["function"]["name"].is_string()) {
    r->tool_choice = ToolChoice::kFunction;
    r->tool_function = c["function"]["name"].get<std::string>();
    bool known = false;
    for (const ToolSpec& t : r->tool_specs) known |= t.name == r->tool_function;
    if (!known) {
      return Bad("tool_choice",
                 "tool_choice names '" + r->tool_function + "', not one of the tools");
    }
  } else {
    return Bad("tool_choice",
               "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
               "\"function\": {\"name\": ...}}");
  }
  if (r->tool_specs.empty()) {
    return Bad("tool_choice", "tool_choice asks for a tool call, but the request has no tools");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseToolFields(const json& j, ParsedRequest* r) {
  if (Has(j, "function_call")) {
    const json& c = j["function_call"];
    if (!(c.is_string() && (c == "none" || c == "auto"))) {
      return Bad("function_call",
                 "function_call (the legacy field) may only be \"none\" or \"auto\"; force a "
                 "call with tools and tool_choice");
    }
  }
  if (!r->chat) return std::nullopt;  // completions: tools are named as ignored
  if (Has(j, "tools")) {
    if (auto e = ParseTools(j["tools"], r)) return e;
  }
  if (auto e = ParseToolChoice(j, r)) return e;
  if (auto e = GetBool(j, "parallel_tool_calls", &r->parallel_tool_calls)) return e;
  if (Has(j, "chat_template_kwargs")) {
    if (!j["chat_template_kwargs"].is_object()) {
      return Bad("chat_template_kwargs", "chat_template_kwargs must be an object");
    }
    r->chat_template_kwargs = j["chat_template_kwargs"];
  }
  return std::nullopt;
}

std::optional<ApiError> ParseMessageToolParts(const json& m, ChatMessage* msg) {
  for (const char* key : {"tool_call_id", "name"}) {
    if (!Has(m, key)) continue;
    if (!m[key].is_string()) return Bad("messages", std::string(key) + " must be a string");
    (std::string(key) == "name" ? msg->name : msg->tool_call_id) = m[key].get<std::string>();
  }
  if (!Has(m, "tool_calls")) return std::nullopt;
  if (msg->role != "assistant") return Bad("messages", "only assistant messages hold tool_calls");
  const json& calls = m["tool_calls"];
  if (!calls.is_array()) return Bad("messages", "tool_calls must be an array");
  msg->tool_calls = json::array();
  for (const json& c : calls) {
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
        !c["function"].contains("name") || !c["function"]["name"].is_string()) {
      return Bad("messages", "a tool call needs a function with a name");
    }
    json call = c;
    json& args = call["function"]["arguments"];
    if (args.is_string()) {  // templates read the arguments as an object, as vLLM gives them
      json parsed = request_json::ParseEmbedded(args.get<std::string>());
      if (parsed.is_object()) args = std::move(parsed);
    } else if (!args.is_object()) {
      return Bad("messages", "a tool call's arguments must be JSON text or an object");
    }
    msg->tool_calls.push_back(std::move(call));
  }
  return std::nullopt;
}

}  // namespace pinfer::server
