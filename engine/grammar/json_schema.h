// JSON grammars in GBNF text (compile with CompileGrammar): any JSON object (OpenAI's
// response_format json_object) and the sentences a JSON schema accepts (json_schema).
//
// Supported schema keywords (README "Grammars"): type (one or a list), properties,
// required, additionalProperties, items, minItems, maxItems, enum, const, anyOf, oneOf,
// $ref to "#/$defs/..." or "#/definitions/..." (recursion allowed), format (date, time,
// date-time, uuid), minLength, maxLength; annotations (title, description, examples,
// default, $schema, $id, $comment, deprecated, readOnly, writeOnly) are ignored. Any other
// keyword is an InvalidArgument naming it and where it is: never a looser grammar.
//
// Where the grammar is stricter than the schema, on purpose, so that generation ends:
// whitespace between tokens is at most one space, or a newline and up to 20 spaces or tabs;
// integers have at most 16 digits, fractions 16 and exponents 3; an object with properties
// and no additionalProperties gets only its declared properties, in declared order; oneOf
// is matched as anyOf (a value matching two branches is not refused).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace pinfer::grammar {

inline constexpr int kMaxSchemaDepth = 64;  // nested subschemas

// GBNF for any JSON object (with whitespace as above); its start rule is "root".
std::string JsonObjectGbnf();

// GBNF for the schema's values; its start rule is "root". InvalidArgument naming what is not
// supported, or what is wrong (a $ref that resolves nowhere, minItems > maxItems, ...).
absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema);
// The schema's rules for combining with other rules in one grammar: its start rule is named
// `rule` (letters, digits, '-'), its helper rules `rule`-s-..., and the json-* and ws rules
// they use are left out: add JsonPrimitiveRules() once per grammar.
absl::StatusOr<std::string> JsonSchemaRules(const nlohmann::ordered_json& schema,
                                            const std::string& rule);
std::string JsonPrimitiveRules();  // ws and json-* (any value, object, string, number, ...)
// The same for schema text (which must be a JSON object or boolean).
absl::StatusOr<std::string> JsonSchemaTextToGbnf(std::string_view schema_json);

// `text` as a GBNF string literal, quotes included ("a\"b" for a"b).
std::string GbnfQuote(std::string_view text);

}  // namespace pinfer::grammar
