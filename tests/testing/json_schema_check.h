// A JSON value checked against a JSON schema, for tests of constrained generation: the
// keywords engine/grammar's schemas use (type, properties, required, additionalProperties,
// enum, const, items, minItems, maxItems, minLength, maxLength, anyOf). Written from the
// JSON Schema specification, independently of engine/grammar/json_schema.cc, so that a test
// does not check the grammar compiler with itself.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace pinfer::testing {

// The schema the structured-output tests ask a story model for: an object with a string, an
// integer, an enum and an array (lengths bounded, so that an answer ends in a few hundred
// tokens).
inline constexpr char kStorySchema[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 20},
    "age": {"type": "integer"},
    "mood": {"enum": ["happy", "sad", "sleepy"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}
  },
  "required": ["name", "age", "mood", "tags"],
  "additionalProperties": false
})";

// "" when `value` is valid; else what is wrong and where ("/tags/1: not a string").
std::string SchemaViolation(const nlohmann::json& value, const nlohmann::json& schema,
                            const std::string& path = "");

// Parses `text` as one JSON value and checks it: "" when it parses and is valid.
std::string TextViolation(const std::string& text, const nlohmann::json& schema);

}  // namespace pinfer::testing
