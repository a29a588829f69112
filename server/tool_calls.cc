#include "server/tool_calls.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/grammar/json_schema.h"
#include "engine/param_error.h"
#include "server/request_json.h"

namespace pinfer::server {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool Contains(std::string_view s, std::string_view part) { return s.find(part) != s.npos; }

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

std::string_view Trim(std::string_view s) {
  s = TrimLeft(s);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool Known(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// {"name": ..., "arguments" | "parameters": {...} or JSON text of an object} as a call.
std::optional<ToolCall> CallFromJson(const json& j, const std::vector<std::string>& names) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall c;
  c.name = j["name"].get<std::string>();
  if (!Known(names, c.name)) return std::nullopt;
  json args = json::object();
  for (const char* key : {"arguments", "parameters"}) {
    if (j.contains(key)) args = j[key];
  }
  if (args.is_string()) args = request_json::ParseEmbedded(args.get<std::string>());
  if (!args.is_object()) return std::nullopt;
  c.arguments = args.dump();
  return c;
}

std::optional<json> ParseJson(std::string_view text) {
  json j = request_json::ParseEmbedded(text);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

ParsedAnswer Hermes(std::string_view text, const std::vector<std::string>& names) {
  ParsedAnswer out;
  size_t at = 0;
  while (true) {
    const size_t open = text.find(kHermesOpen, at);
    if (open == text.npos) break;
    size_t close = text.find(kHermesClose, open);
    const size_t body = open + kHermesOpen.size();
    const size_t end = close == text.npos ? text.size() : close + kHermesClose.size();
    if (close == text.npos) close = text.size();  // an unclosed last call, as llama.cpp reads it
    std::optional<json> j = ParseJson(Trim(text.substr(body, close - body)));
    std::optional<ToolCall> call = j ? CallFromJson(*j, names) : std::nullopt;
    out.content += text.substr(at, (call ? open : end) - at);
    if (call) out.calls.push_back(std::move(*call));
    at = end;
  }
  out.content += text.substr(std::min(at, text.size()));
  return out;
}

// A JSON array of calls, or one call object; nullopt unless every entry is a call.
std::optional<std::vector<ToolCall>> CallList(std::string_view payload,
                                              const std::vector<std::string>& names) {
  std::optional<json> j = ParseJson(Trim(payload));
  if (!j) return std::nullopt;
  const json list = j->is_array() ? *j : json::array({*j});
  std::vector<ToolCall> calls;
  for (const json& one : list) {
    std::optional<ToolCall> c = CallFromJson(one, names);
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

ParsedAnswer Mistral(std::string_view text, const std::vector<std::string>& names) {
  const size_t marker = text.find(kMistralMarker);
  const size_t from = marker == text.npos ? 0 : marker + kMistralMarker.size();
  if (marker == text.npos && !TrimLeft(text).starts_with("[")) {
    return {std::string(text), {}};
  }
  std::optional<std::vector<ToolCall>> calls = CallList(text.substr(from), names);
  if (!calls) return {std::string(text), {}};
  return {std::string(text.substr(0, marker == text.npos ? 0 : marker)), std::move(*calls)};
}

ParsedAnswer Llama3(std::string_view text, const std::vector<std::string>& names) {
  std::string_view body = Trim(text);
  if (body.starts_with(kPythonTag)) body.remove_prefix(kPythonTag.size());
  ParsedAnswer out;
  while (!body.empty()) {  // calls separated by ';'
    const size_t semi = std::min(body.find(';'), body.size());
    const std::string_view part = Trim(body.substr(0, semi));
    body.remove_prefix(std::min(semi + 1, body.size()));
    if (part.empty()) continue;
    std::optional<json> j = ParseJson(part);
    std::optional<ToolCall> c = j ? CallFromJson(*j, names) : std::nullopt;
    if (!c) return {std::string(text), {}};
    out.calls.push_back(std::move(*c));
  }
  if (out.calls.empty()) out.content = std::string(text);
  return out;
}

// The first position where `marker` starts in text, or where a prefix of it ends the text.
size_t MarkerStart(std::string_view text, std::string_view marker) {
  const size_t at = text.find(marker);
  if (at != text.npos) return at;
  for (size_t keep = std::min(marker.size() - 1, text.size()); keep > 0; --keep) {
    if (text.substr(text.size() - keep) == marker.substr(0, keep)) return text.size() - keep;
  }
  return text.size();
}

}  // namespace

const char* ToolSyntaxName(ToolSyntax s) {
  switch (s) {
    case ToolSyntax::kHermes:
      return "hermes";
    case ToolSyntax::kLlama3:
      return "llama3-json";
    case ToolSyntax::kMistral:
      return "mistral";
  }
  return "hermes";
}

ToolSyntax ToolSyntaxFor(std::string_view source, ChatTemplate family) {
  if (Contains(source, kHermesOpen)) return ToolSyntax::kHermes;
  if (Contains(source, kMistralMarker)) return ToolSyntax::kMistral;
  if (Contains(source, kPythonTag) || Contains(source, "ipython")) return ToolSyntax::kLlama3;
  if (family == ChatTemplate::kLlama3) return ToolSyntax::kLlama3;
  if (family == ChatTemplate::kMistral) return ToolSyntax::kMistral;
  return ToolSyntax::kHermes;
}

ParsedAnswer ParseToolCalls(std::string_view text, ToolSyntax syntax,
                            const std::vector<std::string>& names) {
  ParsedAnswer a = syntax == ToolSyntax::kHermes   ? Hermes(text, names)
                   : syntax == ToolSyntax::kLlama3 ? Llama3(text, names)
                                                   : Mistral(text, names);
  if (!a.calls.empty()) a.content = std::string(Trim(a.content));
  return a;
}

size_t ToolCallStart(std::string_view text, ToolSyntax syntax) {
  const size_t first = text.size() - TrimLeft(text).size();
  switch (syntax) {
    case ToolSyntax::kHermes:
      return MarkerStart(text, kHermesOpen);
    case ToolSyntax::kLlama3:
      if (first == text.size() || text[first] == '{' || text[first] == '<') return 0;
      return text.size();
    case ToolSyntax::kMistral:
      if (first == text.size() || text[first] == '[') return 0;
      return MarkerStart(text, kMistralMarker);
  }
  return text.size();
}

absl::StatusOr<std::string> ForcedCallGbnf(ToolSyntax syntax, const std::vector<ToolSpec>& tools,
                                           bool parallel) {
  const char* args_key = syntax == ToolSyntax::kLlama3 ? "parameters" : "arguments";
  std::string rules;
  std::vector<std::string> calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string rule = absl::StrCat("args-", i);
    const json schema =
        tools[i].parameters.is_null() ? json{{"type", "object"}} : tools[i].parameters;
    auto args = grammar::JsonSchemaRules(schema, rule);
    if (!args.ok()) {
      return InvalidParamError("tools", absl::StrCat("tool '", tools[i].name,
                                                     "' parameters: ", args.status().message()));
    }
    absl::StrAppend(&rules, *args);
    const std::string head =
        absl::StrCat("{\"name\": ", json(tools[i].name).dump(), ", \"", args_key, "\": ");
    calls.push_back(absl::StrCat(grammar::GbnfQuote(head), " ", rule, " \"}\""));
  }
  std::string root;
  const std::string call = absl::StrCat("( ", absl::StrJoin(calls, " | "), " )");
  switch (syntax) {
    case ToolSyntax::kHermes:
      root = absl::StrCat("call ::= \"<tool_call>\\n\" ", call, " \"\\n</tool_call>\"\n",
                          "root ::= call", parallel ? " ( \"\\n\" call )*" : "", "\n");
      break;
    case ToolSyntax::kLlama3:  // one call: Llama 3's format has no parallel calls
      root = absl::StrCat("root ::= ", call, "\n");
      break;
    case ToolSyntax::kMistral:
      root = absl::StrCat("call ::= ", call, "\nroot ::= \"[\" call",
                          parallel ? " ( \", \" call )*" : "", " \"]\"\n");
      break;
  }
  return absl::StrCat(root, rules, grammar::JsonPrimitiveRules());
}

std::string ToolSystemText(ToolSyntax syntax, const json& tools) {
  std::string list;
  for (const json& t : tools) absl::StrAppend(&list, t.dump(), "\n");
  std::string how;
  switch (syntax) {
    case ToolSyntax::kHermes:
      how =
          "To call a function, answer with a <tool_call></tool_call> block holding "
          "{\"name\": <function name>, \"arguments\": <JSON object>}, one block per call.";
      break;
    case ToolSyntax::kLlama3:
      how =
          "To call a function, answer with only {\"name\": <function name>, \"parameters\": "
          "<JSON object>}.";
      break;
    case ToolSyntax::kMistral:
      how =
          "To call functions, answer with [TOOL_CALLS] and a JSON list of {\"name\": "
          "<function name>, \"arguments\": <JSON object>}.";
      break;
  }
  return absl::StrCat("You can call these functions (JSON descriptions, one a line):\n", list, how);
}

std::string CallsText(ToolSyntax syntax, const json& tool_calls) {
  std::vector<std::string> calls;
  const char* args_key = syntax == ToolSyntax::kLlama3 ? "parameters" : "arguments";
  for (const json& c : tool_calls) {
    const json f = c.value("function", json::object());
    json one = {{"name", f.value("name", "")}, {args_key, f.value("arguments", json::object())}};
    calls.push_back(one.dump());
  }
  switch (syntax) {
    case ToolSyntax::kHermes: {
      std::string out;
      for (const std::string& c : calls) {
        absl::StrAppend(&out, out.empty() ? "" : "\n", std::string(kHermesOpen), "\n", c, "\n",
                        std::string(kHermesClose));
      }
      return out;
    }
    case ToolSyntax::kLlama3:
      return absl::StrJoin(calls, "; ");
    case ToolSyntax::kMistral:
      return absl::StrCat(std::string(kMistralMarker), "[", absl::StrJoin(calls, ", "), "]");
  }
  return "";
}

}  // namespace pinfer::server
