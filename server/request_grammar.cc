#include "server/request_grammar.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/regex.h"
#include "engine/param_error.h"

namespace pinfer::server {
namespace {

using json = request_json::json;
using request_json::Bad;
using request_json::Has;

// A field's grammar as GBNF text, or the field's 400.
struct Gbnf {
  std::string text;
  std::optional<ApiError> error;
};

// A grammar compiler's refusal (which knows no request field) as the field's 400.
ApiError FieldError(const std::string& field, const absl::Status& s) {
  return ErrorFromStatus(InvalidParamError(field, absl::StrCat(field, ": ", s.message())));
}

Gbnf FromStatus(const std::string& field, absl::StatusOr<std::string> s) {
  if (s.ok()) return {std::move(*s), std::nullopt};
  return {"", FieldError(field, s.status())};
}

// A JSON schema given as an object, a boolean, or text holding one.
Gbnf Schema(const std::string& field, const json& v) {
  if (v.is_string()) {
    const json parsed = request_json::ParseEmbedded(v.get<std::string>());
    if (parsed.is_discarded()) return {"", Bad(field, field + " is not valid JSON")};
    return Schema(field, parsed);
  }
  if (!v.is_object() && !v.is_boolean()) {
    return {"", Bad(field, field + " must be a JSON schema (an object)")};
  }
  return FromStatus(field, grammar::JsonSchemaToGbnf(v));
}

Gbnf Choice(const std::string& field, const json& v) {
  if (!v.is_array() || v.empty()) {
    return {"", Bad(field, field + " must be a non-empty list of strings")};
  }
  std::vector<std::string> alts;
  for (const json& c : v) {
    if (!c.is_string()) return {"", Bad(field, field + " must be a non-empty list of strings")};
    alts.push_back(grammar::GbnfQuote(c.get<std::string>()));
  }
  return {absl::StrCat("root ::= ", absl::StrJoin(alts, " | "), "\n"), std::nullopt};
}

Gbnf Text(const std::string& field, const json& v) {
  if (!v.is_string()) return {"", Bad(field, field + " must be a string")};
  return {v.get<std::string>(), std::nullopt};
}

Gbnf Regex(const std::string& field, const json& v) {
  if (!v.is_string()) return {"", Bad(field, field + " must be a string")};
  return FromStatus(field, grammar::RegexToGbnf(v.get<std::string>()));
}

// OpenAI's response_format (and llama-server's json_object with a schema). text: "".
Gbnf ResponseFormat(const json& f) {
  const std::string field = "response_format";
  if (!f.is_object() || !f.contains("type") || !f["type"].is_string()) {
    return {"", Bad(field, "response_format must be an object with a type")};
  }
  const std::string type = f["type"].get<std::string>();
  if (type == "text") return {};
  if (type == "json_object") {
    if (Has(f, "schema")) return Schema(field, f["schema"]);
    return {grammar::JsonObjectGbnf(), std::nullopt};
  }
  if (type == "json_schema") {
    if (!f.contains("json_schema") || !f["json_schema"].is_object()) {
      return {"", Bad(field,
                      "response_format json_schema needs a json_schema object "
                      "({\"name\": ..., \"schema\": {...}})")};
    }
    const json& js = f["json_schema"];
    if (Has(js, "schema")) return Schema(field, js["schema"]);
    return {grammar::JsonObjectGbnf(), std::nullopt};
  }
  return {"", Bad(field, "response_format type '" + type +
                             "' is not supported (text, json_object, json_schema)")};
}

// vLLM's structured_outputs: exactly one of its kinds.
Gbnf StructuredOutputs(const json& v) {
  const std::string field = "structured_outputs";
  if (!v.is_object()) return {"", Bad(field, "structured_outputs must be an object")};
  std::vector<std::string> kinds;
  for (const char* k : {"json", "regex", "choice", "grammar", "json_object"}) {
    if (Has(v, k)) kinds.push_back(k);
  }
  if (kinds.size() != 1) {
    return {"", Bad(field,
                    "structured_outputs takes exactly one of json, regex, choice, "
                    "grammar, json_object")};
  }
  const std::string& k = kinds[0];
  if (k == "json") return Schema(field, v[k]);
  if (k == "regex") return Regex(field, v[k]);
  if (k == "choice") return Choice(field, v[k]);
  if (k == "grammar") return Text(field, v[k]);
  if (!v[k].is_boolean()) return {"", Bad(field, "structured_outputs.json_object must be true")};
  return v[k].get<bool>() ? Gbnf{grammar::JsonObjectGbnf(), std::nullopt} : Gbnf{};
}

Gbnf FieldGbnf(const std::string& field, const json& v) {
  if (field == "response_format") return ResponseFormat(v);
  if (field == "guided_json" || field == "json_schema") return Schema(field, v);
  if (field == "guided_regex") return Regex(field, v);
  if (field == "guided_choice") return Choice(field, v);
  if (field == "structured_outputs") return StructuredOutputs(v);
  // guided_grammar, grammar: GBNF; llama-server sends "" for none.
  return Text(field, v);
}

}  // namespace

std::optional<ApiError> ParseGrammarFields(const json& j, ParsedRequest* r) {
  std::string field, gbnf;
  for (const char* name : kGrammarFields) {
    if (!Has(j, name)) continue;
    Gbnf g = FieldGbnf(name, j[name]);
    if (g.error) return g.error;
    if (g.text.empty()) continue;
    if (!field.empty()) {
      return Bad(
          name, absl::StrCat(field, " and ", name, " both constrain the output; give one of them"));
    }
    field = name;
    gbnf = std::move(g.text);
  }
  if (field.empty()) return std::nullopt;
  auto compiled = grammar::CompileGrammar(gbnf);
  if (!compiled.ok()) {
    return FieldError(field, compiled.status());
  }
  r->grammar = std::move(*compiled);
  r->grammar_field = field;
  return std::nullopt;
}

}  // namespace pinfer::server
