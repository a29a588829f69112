#include "tests/testing/json_schema_check.h"

namespace pinfer::testing {
namespace {

using json = nlohmann::json;

bool HasType(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

// Characters (code points) of a UTF-8 string.
size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string CheckObject(const json& v, const json& schema, const std::string& path) {
  const json props = schema.value("properties", json::object());
  for (const json& name : schema.value("required", json::array())) {
    if (!v.contains(name.get<std::string>())) return path + ": lacks " + name.dump();
  }
  const bool closed = schema.contains("additionalProperties") &&
                      schema["additionalProperties"].is_boolean() &&
                      !schema["additionalProperties"].get<bool>();
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (props.contains(it.key())) {
      std::string e = SchemaViolation(it.value(), props[it.key()], path + "/" + it.key());
      if (!e.empty()) return e;
    } else if (closed) {
      return path + ": property '" + it.key() + "' is not allowed";
    }
  }
  return "";
}

std::string CheckArray(const json& v, const json& schema, const std::string& path) {
  if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) {
    return path + ": fewer than minItems";
  }
  if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) {
    return path + ": more than maxItems";
  }
  if (!schema.contains("items")) return "";
  for (size_t i = 0; i < v.size(); ++i) {
    std::string e = SchemaViolation(v[i], schema["items"], path + "/" + std::to_string(i));
    if (!e.empty()) return e;
  }
  return "";
}

}  // namespace

std::string SchemaViolation(const json& v, const json& schema, const std::string& path) {
  const std::string where = path.empty() ? "/" : path;
  if (schema.is_boolean()) return schema.get<bool>() ? "" : where + ": schema false";
  if (schema.contains("type")) {
    const json& t = schema["type"];
    bool ok = false;
    if (t.is_string()) ok = HasType(v, t.get<std::string>());
    for (const json& one : t.is_array() ? t : json::array())
      ok |= HasType(v, one.get<std::string>());
    if (!ok) return where + ": " + v.dump() + " is not of type " + t.dump();
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& e : schema["enum"]) found |= e == v;
    if (!found) return where + ": " + v.dump() + " is not in the enum";
  }
  if (schema.contains("const") && schema["const"] != v) return where + ": not the const";
  if (schema.contains("anyOf")) {
    bool any = false;
    for (const json& s : schema["anyOf"]) any |= SchemaViolation(v, s, path).empty();
    if (!any) return where + ": matches no anyOf branch";
  }
  if (v.is_string()) {
    const size_t n = CodePoints(v.get<std::string>());
    if (schema.contains("minLength") && n < schema["minLength"].get<size_t>()) {
      return where + ": shorter than minLength";
    }
    if (schema.contains("maxLength") && n > schema["maxLength"].get<size_t>()) {
      return where + ": longer than maxLength";
    }
  }
  if (v.is_object()) return CheckObject(v, schema, where == "/" ? "" : path);
  if (v.is_array()) return CheckArray(v, schema, where == "/" ? "" : path);
  return "";
}

std::string TextViolation(const std::string& text, const json& schema) {
  const json v = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return "not JSON: " + text;
  return SchemaViolation(v, schema);
}

}  // namespace pinfer::testing
