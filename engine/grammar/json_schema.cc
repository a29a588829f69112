// JSON schema -> GBNF. Each object, array and $ref target becomes a named rule; scalars are
// written inline against the shared primitive rules below.
#include "engine/grammar/json_schema.h"

#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/grammar/gbnf_ast.h"
#include "engine/grammar/grammar.h"

namespace pinfer::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Primitive rules every JSON grammar shares (bounded whitespace and digit counts: see the
// header). Their names start with "json-" so that schema rule names cannot collide.
constexpr const char* kPrimitives = R"(ws ::= | " " | "\n" [ \t]{0,20}
json-value ::= json-object | json-array | json-string | json-number | json-bool | json-null
json-object ::= "{" ws ( json-member ( "," ws json-member )* )? "}" ws
json-member ::= json-string ":" ws json-value
json-array ::= "[" ws ( json-value ( "," ws json-value )* )? "]" ws
json-string ::= "\"" json-char* "\"" ws
json-char ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-int ::= "-"? ( [0-9] | [1-9] [0-9]{1,15} ) ws
json-number ::= "-"? ( [0-9] | [1-9] [0-9]{1,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )? ws
json-bool ::= ( "true" | "false" ) ws
json-null ::= "null" ws
json-date ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] )
json-time ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
json-uuid ::= [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}
)";

const std::set<std::string> kAnnotations = {"title",    "description", "examples", "default",
                                            "$schema",  "$id",         "$comment", "deprecated",
                                            "readOnly", "writeOnly"};
const std::set<std::string> kSupported = {
    "type",     "properties",  "required", "additionalProperties",
    "items",    "minItems",    "maxItems", "enum",
    "const",    "anyOf",       "oneOf",    "$ref",
    "$defs",    "definitions", "format",   "minLength",
    "maxLength"};

std::string RuleName(const std::string& hint) {
  std::string out;
  for (char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out.push_back(ok ? c : '-');
  }
  return out.empty() ? "value" : out;
}

class Converter {
 public:
  // rule: the start rule's name; the others are named rule-s-...
  Converter(const Json& root, std::string rule) : root_(root), rule_(std::move(rule)) {}

  absl::StatusOr<std::string> Run() {
    auto body = Visit(root_, "root", "", 0);
    if (!body.ok()) return body.status();
    std::string out = absl::StrCat(rule_, " ::= ", *body, "\n");
    for (const auto& [name, rule] : rules_) absl::StrAppend(&out, name, " ::= ", rule, "\n");
    return out;
  }

 private:
  absl::Status Unsupported(const std::string& what, const std::string& path) {
    return absl::InvalidArgumentError(absl::StrCat(
        "json_schema: ", what, " at '", path.empty() ? "/" : path, "' is not supported"));
  }
  absl::Status Bad(const std::string& what, const std::string& path) {
    return absl::InvalidArgumentError(
        absl::StrCat("json_schema: ", what, " at '", path.empty() ? "/" : path, "'"));
  }

  std::string NewRule(const std::string& hint, std::string body) {
    std::string base = absl::StrCat(rule_ == "root" ? "" : rule_ + "-", "s-", RuleName(hint));
    std::string name = base;
    for (int k = 2; rules_.count(name); ++k) name = absl::StrCat(base, "-", k);
    rules_[name] = std::move(body);
    return name;
  }

  // The GBNF expression for values of `s`.
  absl::StatusOr<std::string> Visit(const Json& s, const std::string& hint, const std::string& path,
                                    int depth) {
    if (depth > kMaxSchemaDepth) {
      return Bad(absl::StrCat("schema nested deeper than ", kMaxSchemaDepth, " levels"), path);
    }
    if (s.is_boolean()) {
      if (s.get<bool>()) return std::string("json-value");
      return Bad("schema 'false' matches nothing", path);
    }
    if (!s.is_object()) return Bad("a schema must be an object or a boolean", path);
    for (const auto& [key, v] : s.items()) {
      if (!kAnnotations.count(key) && !kSupported.count(key)) {
        return Unsupported(absl::StrCat("keyword '", key, "'"), path);
      }
    }
    if (s.contains("$ref")) return Ref(s, path, depth);
    if (s.contains("anyOf") || s.contains("oneOf")) return AnyOf(s, hint, path, depth);
    if (s.contains("const")) return Literal(s["const"], s, "const", path);
    if (s.contains("enum")) return Enum(s, path);
    std::vector<std::string> types;
    if (!s.contains("type")) {
      if (s.contains("properties") || s.contains("additionalProperties")) {
        types = {"object"};
      } else if (s.contains("items")) {
        types = {"array"};
      } else {
        return std::string("json-value");
      }
    } else if (s["type"].is_string()) {
      types = {s["type"].get<std::string>()};
    } else if (s["type"].is_array() && !s["type"].empty()) {
      for (const Json& t : s["type"]) {
        if (!t.is_string()) return Bad("'type' entries must be strings", path);
        types.push_back(t.get<std::string>());
      }
    } else {
      return Bad("'type' must be a string or a non-empty list of strings", path);
    }
    std::vector<std::string> alts;
    for (const std::string& t : types) {
      auto a = Typed(s, t, hint, path, depth);
      if (!a.ok()) return a.status();
      alts.push_back(*a);
    }
    return alts.size() == 1 ? alts[0] : absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
  }

  // Keywords a branch of anyOf/$ref may not combine with (annotations and $defs aside).
  absl::Status OnlyKeyword(const Json& s, const std::string& keyword, const std::string& path) {
    for (const auto& [key, v] : s.items()) {
      if (key != keyword && !kAnnotations.count(key) && key != "$defs" && key != "definitions") {
        return Unsupported(absl::StrCat("'", key, "' beside '", keyword, "'"), path);
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> AnyOf(const Json& s, const std::string& hint, const std::string& path,
                                    int depth) {
    const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
    if (s.contains("anyOf") && s.contains("oneOf")) return Unsupported("anyOf with oneOf", path);
    absl::Status st = OnlyKeyword(s, key, path);
    if (!st.ok()) return st;
    const Json& list = s[key];
    if (!list.is_array() || list.empty())
      return Bad(absl::StrCat("'", key, "' must be a non-empty list"), path);
    std::vector<std::string> alts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto a = Visit(list[i], absl::StrCat(hint, "-", i), absl::StrCat(path, "/", key, "/", i),
                     depth + 1);
      if (!a.ok()) return a.status();
      alts.push_back(*a);
    }
    return absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
  }

  absl::StatusOr<std::string> Ref(const Json& s, const std::string& path, int depth) {
    absl::Status st = OnlyKeyword(s, "$ref", path);
    if (!st.ok()) return st;
    if (!s["$ref"].is_string()) return Bad("'$ref' must be a string", path);
    const std::string ref = s["$ref"].get<std::string>();
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    if (ref.rfind("#/", 0) != 0)
      return Unsupported(absl::StrCat("$ref '", ref, "' (only local \"#/...\" refs)"), path);
    const Json* target = nullptr;
    try {
      target = &root_.at(Json::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
      return Bad(absl::StrCat("$ref '", ref, "' resolves to nothing"), path);
    }
    // Named before it is visited, so that a recursive reference finds the rule.
    const std::string name = NewRule(ref.substr(ref.rfind('/') + 1), "");
    refs_[ref] = name;
    auto body = Visit(*target, name, ref.substr(1), depth + 1);
    if (!body.ok()) return body.status();
    rules_[name] = *body;
    return name;
  }

  static bool HasType(const Json& v, const std::string& t) {
    if (t == "string") return v.is_string();
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    return false;
  }

  // True when v's JSON type is allowed by s's "type" (absent: any).
  static bool TypeAllows(const Json& s, const Json& v) {
    if (!s.contains("type")) return true;
    if (s["type"].is_string()) return HasType(v, s["type"].get<std::string>());
    for (const Json& t : s["type"]) {
      if (t.is_string() && HasType(v, t.get<std::string>())) return true;
    }
    return false;
  }

  absl::StatusOr<std::string> Literal(const Json& v, const Json& s, const std::string& key,
                                      const std::string& path) {
    if (!TypeAllows(s, v))
      return Bad(absl::StrCat("'", key, "' value does not have the schema's type"), path);
    return absl::StrCat(GbnfQuote(v.dump()), " ws");
  }

  absl::StatusOr<std::string> Enum(const Json& s, const std::string& path) {
    if (!s["enum"].is_array() || s["enum"].empty())
      return Bad("'enum' must be a non-empty list", path);
    std::vector<std::string> alts;
    for (const Json& v : s["enum"]) {
      if (TypeAllows(s, v)) alts.push_back(GbnfQuote(v.dump()));
    }
    if (alts.empty()) return Bad("no 'enum' value has the schema's type", path);
    return absl::StrCat("( ", absl::StrJoin(alts, " | "), " ) ws");
  }

  absl::StatusOr<int> Count(const Json& s, const char* key, int dflt, const std::string& path) {
    if (!s.contains(key)) return dflt;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<long long>() < 0)
      return Bad(absl::StrCat("'", key, "' must be a non-negative integer"), path);
    if (v.get<long long>() > kMaxRepetition) {
      return Unsupported(absl::StrCat("'", key, "' above ", kMaxRepetition), path);
    }
    return static_cast<int>(v.get<long long>());
  }

  absl::StatusOr<std::string> Typed(const Json& s, const std::string& t, const std::string& hint,
                                    const std::string& path, int depth) {
    if (t == "string") return String(s, path);
    if (t == "integer") return std::string("json-int");
    if (t == "number") return std::string("json-number");
    if (t == "boolean") return std::string("json-bool");
    if (t == "null") return std::string("json-null");
    if (t == "array") return Array(s, hint, path, depth);
    if (t == "object") return Object(s, hint, path, depth);
    return Bad(absl::StrCat("unknown type '", t, "'"), path);
  }

  absl::StatusOr<std::string> String(const Json& s, const std::string& path) {
    if (s.contains("format")) {
      if (s.contains("minLength") || s.contains("maxLength"))
        return Unsupported("'format' with a length", path);
      const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
      static const std::map<std::string, std::string> kFormats = {
          {"date", "json-date"},
          {"time", "json-time"},
          {"date-time", "json-date \"T\" json-time"},
          {"uuid", "json-uuid"}};
      auto it = kFormats.find(f);
      if (it == kFormats.end()) return Unsupported(absl::StrCat("string format '", f, "'"), path);
      return absl::StrCat("\"\\\"\" ", it->second, " \"\\\"\" ws");
    }
    auto lo = Count(s, "minLength", 0, path);
    if (!lo.ok()) return lo.status();
    auto hi = Count(s, "maxLength", -1, path);
    if (!hi.ok()) return hi.status();
    if (*lo == 0 && *hi == -1) return std::string("json-string");
    if (*hi != -1 && *hi < *lo) return Bad("maxLength below minLength", path);
    return absl::StrCat("\"\\\"\" json-char{", *lo, ",", *hi == -1 ? "" : absl::StrCat(*hi),
                        "} \"\\\"\" ws");
  }

  absl::StatusOr<std::string> Array(const Json& s, const std::string& hint, const std::string& path,
                                    int depth) {
    std::string item = "json-value";
    if (s.contains("items")) {
      auto it = Visit(s["items"], absl::StrCat(hint, "-item"), path + "/items", depth + 1);
      if (!it.ok()) return it.status();
      item = *it;
    }
    auto lo = Count(s, "minItems", 0, path);
    if (!lo.ok()) return lo.status();
    auto hi = Count(s, "maxItems", -1, path);
    if (!hi.ok()) return hi.status();
    if (*hi != -1 && *hi < *lo) return Bad("maxItems below minItems", path);
    std::string body;
    if (*hi == 0) {
      body = "\"[\" ws \"]\" ws";
    } else {
      // item ( "," ws item ){lo-1, hi-1}, optional as a whole when lo is 0.
      const int rest_lo = *lo > 0 ? *lo - 1 : 0;
      const std::string rest_hi = *hi == -1 ? "" : absl::StrCat(*hi - 1);
      std::string items =
          absl::StrCat(item, " ( \",\" ws ", item, " ){", rest_lo, ",", rest_hi, "}");
      body = absl::StrCat("\"[\" ws ", *lo > 0 ? items : absl::StrCat("( ", items, " )?"),
                          " \"]\" ws");
    }
    return NewRule(hint, body);
  }

  absl::StatusOr<std::string> Object(const Json& s, const std::string& hint,
                                     const std::string& path, int depth);
  absl::StatusOr<std::string> FreeObject(const Json& s, const std::string& hint,
                                         const std::string& path, int depth);

  const Json& root_;
  const std::string rule_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;
};

// Declared properties in order; a required one must appear, an optional one may be left
// out. rest_i (the properties from i on, after at least one was written) and first_i (from
// i on, none written yet) make the commas come out right in O(properties) rules.
absl::StatusOr<std::string> Converter::Object(const Json& s, const std::string& hint,
                                              const std::string& path, int depth) {
  if (!s.contains("properties")) return FreeObject(s, hint, path, depth);
  const Json& props = s["properties"];
  if (!props.is_object()) return Bad("'properties' must be an object", path);
  if (s.contains("additionalProperties") &&
      !(s["additionalProperties"].is_boolean() && !s["additionalProperties"].get<bool>())) {
    return Unsupported("additionalProperties other than false beside properties", path);
  }
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return Bad("'required' must be a list", path);
    for (const Json& r : s["required"]) {
      if (!r.is_string() || !props.contains(r.get<std::string>())) {
        return Bad(absl::StrCat("'required' names ", r.dump(), ", not a declared property"), path);
      }
      required.insert(r.get<std::string>());
    }
  }
  std::vector<std::string> kv;
  std::vector<bool> req;
  for (const auto& [key, sub] : props.items()) {
    auto v = Visit(sub, absl::StrCat(hint, "-", key), absl::StrCat(path, "/properties/", key),
                   depth + 1);
    if (!v.ok()) return v.status();
    kv.push_back(absl::StrCat(GbnfQuote(Json(key).dump()), " ws \":\" ws ", *v));
    req.push_back(required.count(key) > 0);
  }
  const std::string base = NewRule(hint, "");
  const size_t n = kv.size();
  auto rest = [&](size_t i) { return i == n ? std::string() : absl::StrCat(base, "_r", i); };
  auto first = [&](size_t i) { return i == n ? std::string() : absl::StrCat(base, "_f", i); };
  for (size_t i = 0; i < n; ++i) {
    const std::string tail = rest(i + 1);
    std::string one = absl::StrCat("\",\" ws ", kv[i], tail.empty() ? "" : " " + tail);
    rules_[rest(i)] = req[i] ? one : absl::StrCat("( ", one, " ) | ", tail.empty() ? "" : tail);
    std::string start = absl::StrCat(kv[i], tail.empty() ? "" : " " + tail);
    const std::string skip = first(i + 1);
    rules_[first(i)] = req[i] ? start : absl::StrCat("( ", start, " ) | ", skip);
  }
  rules_[base] = absl::StrCat("\"{\" ws ", n ? first(0) : "", " \"}\" ws");
  return base;
}

// An object without declared properties: any keys, values of additionalProperties' schema.
absl::StatusOr<std::string> Converter::FreeObject(const Json& s, const std::string& hint,
                                                  const std::string& path, int depth) {
  if (s.contains("required") && !s["required"].empty()) {
    return Bad("'required' without 'properties'", path);
  }
  std::string value = "json-value";
  if (s.contains("additionalProperties")) {
    const Json& ap = s["additionalProperties"];
    if (ap.is_boolean() && !ap.get<bool>()) return NewRule(hint, "\"{\" ws \"}\" ws");
    auto v = Visit(ap, absl::StrCat(hint, "-value"), path + "/additionalProperties", depth + 1);
    if (!v.ok()) return v.status();
    value = *v;
  }
  if (value == "json-value") return std::string("json-object");
  const std::string member = absl::StrCat("json-string \":\" ws ", value);
  return NewRule(hint,
                 absl::StrCat("\"{\" ws ( ", member, " ( \",\" ws ", member, " )* )? \"}\" ws"));
}

}  // namespace

std::string GbnfQuote(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string JsonObjectGbnf() { return absl::StrCat("root ::= json-object\n", kPrimitives); }

std::string JsonPrimitiveRules() { return kPrimitives; }

absl::StatusOr<std::string> JsonSchemaRules(const nlohmann::ordered_json& schema,
                                            const std::string& rule) {
  return Converter(schema, rule).Run();
}

absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema) {
  auto rules = JsonSchemaRules(schema, "root");
  if (!rules.ok()) return rules.status();
  return absl::StrCat(*rules, kPrimitives);
}

absl::StatusOr<std::string> JsonSchemaTextToGbnf(std::string_view schema_json) {
  Json schema = Json::parse(schema_json.begin(), schema_json.end(), nullptr, false);
  if (schema.is_discarded()) return absl::InvalidArgumentError("json_schema: not valid JSON");
  return JsonSchemaToGbnf(schema);
}

}  // namespace pinfer::grammar
