// The request fields that constrain the output to a grammar (README "Grammars"), all
// compiled to the same engine grammar on the handler thread, where their faults are 400s
// naming the field:
//   response_format  OpenAI: {"type": "text"} (no constraint), {"type": "json_object"} (any
//                    JSON object; llama-server's "schema" inside it is honoured), {"type":
//                    "json_schema", "json_schema": {"name", "schema", "strict"}} (strict or
//                    not, the schema is enforced; no "schema": any JSON object)
//   guided_json      vLLM: a JSON schema (an object, or a string holding one)
//   guided_regex     vLLM: a regular expression the whole output matches
//   guided_choice    vLLM: one of a list of strings
//   guided_grammar   vLLM: a grammar, here in GBNF
//   structured_outputs  vLLM's newer form: {"json" | "regex" | "choice" | "grammar" |
//                    "json_object": ...}
//   grammar          llama-server: GBNF
//   json_schema      llama-server: a JSON schema
// At most one of them may constrain a request. A schema keyword or regex construct the
// compiler does not support is a 400 naming it, never a looser grammar.
#pragma once

#include <optional>
#include <string>

#include "server/openai_request.h"
#include "server/request_json.h"

namespace pinfer::server {

// Fills r->grammar (and r->grammar_field) from the body's fields.
std::optional<ApiError> ParseGrammarFields(const request_json::json& j, ParsedRequest* r);

// The field names ParseGrammarFields reads (for the parser's list of read fields).
inline constexpr const char* kGrammarFields[] = {
    "response_format", "guided_json",        "guided_regex", "guided_choice",
    "guided_grammar",  "structured_outputs", "grammar",      "json_schema"};

}  // namespace pinfer::server
