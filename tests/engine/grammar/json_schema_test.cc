// JSON schema -> grammar: what each supported keyword lets through and what it refuses, the
// errors for unsupported keywords, and the json_object grammar.
#include "engine/grammar/json_schema.h"

#include <string>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/token_vocab.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pinfer::grammar {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<TokenVocabulary> ByteVocab() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  return std::make_shared<TokenVocabulary>(std::move(bytes), std::vector<int32_t>{});
}

class Schema {
 public:
  explicit Schema(const std::string& schema_json) {
    auto gbnf = JsonSchemaTextToGbnf(schema_json);
    EXPECT_TRUE(gbnf.ok()) << gbnf.status();
    if (!gbnf.ok()) return;
    gbnf_ = *gbnf;
    auto g = CompileGrammar(*gbnf);
    EXPECT_TRUE(g.ok()) << g.status() << "\n" << *gbnf;
    if (g.ok()) automaton_ = std::make_shared<GrammarAutomaton>(*g, ByteVocab());
  }
  bool Accepts(std::string_view text) const {
    if (!automaton_) return false;
    GrammarMatcher m(automaton_);
    return m.AcceptBytes(text) && m.IsAccepting();
  }
  const std::string& gbnf() const { return gbnf_; }

 private:
  std::string gbnf_;
  std::shared_ptr<GrammarAutomaton> automaton_;
};

std::string Error(const std::string& schema_json) {
  auto gbnf = JsonSchemaTextToGbnf(schema_json);
  return gbnf.ok() ? "" : std::string(gbnf.status().message());
}

TEST(JsonSchema, ObjectWithStringIntegerEnumArray) {
  Schema s(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 8},
      "age": {"type": "integer"},
      "mood": {"enum": ["happy", "sad"]},
      "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}},
    "required": ["name", "age", "mood", "tags"], "additionalProperties": false})");
  EXPECT_TRUE(s.Accepts(R"({"name": "Lily", "age": 3, "mood": "happy", "tags": ["a"]})"));
  EXPECT_TRUE(s.Accepts("{\"name\":\"\",\"age\":-12,\"mood\":\"sad\",\"tags\":[\"a\", \"b\"]}"));
  EXPECT_TRUE(
      s.Accepts("{\n  \"name\": \"x\\\"y\",\n  \"age\": 0,\n  \"mood\": \"sad\",\n"
                "  \"tags\": [\"\\u00e9\"]\n}"));
  EXPECT_FALSE(s.Accepts(R"({"name": "Lily", "age": 3, "mood": "happy"})"));  // required
  EXPECT_FALSE(s.Accepts(R"({"name": "Lily", "age": 3.5, "mood": "sad", "tags": ["a"]})"));
  EXPECT_FALSE(s.Accepts(R"({"name": "Lily", "age": 3, "mood": "angry", "tags": ["a"]})"));
  EXPECT_FALSE(s.Accepts(R"({"name": "Lily", "age": 3, "mood": "sad", "tags": []})"));
  EXPECT_FALSE(s.Accepts(R"({"name": "Lily", "age": 3, "mood": "sad", "tags": ["a","b","c"]})"));
  EXPECT_FALSE(s.Accepts(R"({"name": "123456789", "age": 3, "mood": "sad", "tags": ["a"]})"));
  EXPECT_FALSE(s.Accepts(R"({"name": "Lily", "age": 03, "mood": "sad", "tags": ["a"]})"));
  EXPECT_FALSE(s.Accepts(R"({"age": 3, "name": "Lily", "mood": "sad", "tags": ["a"]})"));  // order
}

TEST(JsonSchema, OptionalPropertiesInEverySubset) {
  Schema s(R"({"properties": {"a": {"type": "integer"}, "b": {"type": "boolean"},
                              "c": {"type": "null"}}, "required": ["b"]})");
  EXPECT_TRUE(s.Accepts(R"({"b": true})"));
  EXPECT_TRUE(s.Accepts(R"({"a": 1, "b": false})"));
  EXPECT_TRUE(s.Accepts(R"({"b": true, "c": null})"));
  EXPECT_TRUE(s.Accepts(R"({"a": 1, "b": true, "c": null})"));
  EXPECT_FALSE(s.Accepts(R"({})"));
  EXPECT_FALSE(s.Accepts(R"({"a": 1})"));
  EXPECT_FALSE(s.Accepts(R"({"a": 1, "c": null})"));
  EXPECT_FALSE(s.Accepts(R"({, "b": true})"));
  EXPECT_FALSE(s.Accepts(R"({"b": true,})"));
  EXPECT_FALSE(s.Accepts(R"({"b": true, "d": 1})"));
  Schema none(R"({"type": "object", "properties": {"x": {}, "y": {}}})");
  EXPECT_TRUE(none.Accepts("{}"));
  EXPECT_TRUE(none.Accepts(R"({"y": [1, {"z": "w"}]})"));
  EXPECT_FALSE(none.Accepts(R"({"y": 1, "x": 2})"));
}

TEST(JsonSchema, ConstAnyOfTypeListsAndNull) {
  Schema s(R"({"type": "object", "properties": {
      "kind": {"const": "point"},
      "v": {"anyOf": [{"type": "number"}, {"type": "string", "format": "date"}]},
      "n": {"type": ["integer", "null"]},
      "id": {"type": "string", "format": "uuid"},
      "t": {"oneOf": [{"type": "string", "format": "date-time"}, {"type": "boolean"}]}},
    "required": ["kind", "v", "n", "id", "t"]})");
  const std::string id = "\"123e4567-e89b-12d3-a456-426614174000\"";
  EXPECT_TRUE(s.Accepts(R"({"kind": "point", "v": 1.5e3, "n": null, "id": )" + id +
                        R"(, "t": "2024-02-29T23:59:01.5+01:00"})"));
  EXPECT_TRUE(
      s.Accepts(R"({"kind": "point", "v": "2024-12-01", "n": 7, "id": )" + id + R"(, "t": true})"));
  EXPECT_FALSE(s.Accepts(R"({"kind": "line", "v": 1, "n": 7, "id": )" + id + R"(, "t": true})"));
  EXPECT_FALSE(
      s.Accepts(R"({"kind": "point", "v": "2024-13-01", "n": 7, "id": )" + id + R"(, "t": true})"));
  EXPECT_FALSE(s.Accepts(R"({"kind": "point", "v": 1, "n": 7, "id": "123", "t": true})"));
  EXPECT_FALSE(s.Accepts(R"({"kind": "point", "v": 1, "n": "x", "id": )" + id + R"(, "t": 1})"));
}

TEST(JsonSchema, RecursiveRefsAndFreeObjects) {
  Schema s(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"}, "kids": {"type": "array",
      "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}}})");
  EXPECT_TRUE(s.Accepts(R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4}]}]})"));
  EXPECT_FALSE(s.Accepts(R"({"v": 1, "kids": [{"w": 2}]})"));
  Schema map(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(map.Accepts(R"({"a": 1, "b": 2})"));
  EXPECT_TRUE(map.Accepts("{}"));
  EXPECT_FALSE(map.Accepts(R"({"a": "x"})"));
  Schema any(R"({"type": "object"})");
  EXPECT_TRUE(any.Accepts(R"({"a": [1, 2.5, "x", null, true, {"b": {}}]})"));
  EXPECT_FALSE(any.Accepts(R"([1])"));
  Schema empty(R"({"type": "object", "additionalProperties": false})");
  EXPECT_TRUE(empty.Accepts("{}"));
  EXPECT_FALSE(empty.Accepts(R"({"a": 1})"));
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  EXPECT_THAT(Error(R"({"type": "string", "pattern": "^a+$"})"), HasSubstr("'pattern'"));
  EXPECT_THAT(Error(R"({"properties": {"x": {"type": "integer", "minimum": 3}}})"),
              HasSubstr("keyword 'minimum' at '/properties/x'"));
  EXPECT_THAT(Error(R"({"allOf": [{"type": "string"}]})"), HasSubstr("'allOf'"));
  EXPECT_THAT(Error(R"({"type": "string", "format": "email"})"), HasSubstr("format 'email'"));
  EXPECT_THAT(Error(R"({"properties": {"a": {}}, "additionalProperties": true})"),
              HasSubstr("additionalProperties"));
  EXPECT_THAT(Error(R"({"$ref": "https://example.com/s.json"})"), HasSubstr("only local"));
  EXPECT_THAT(Error(R"({"$ref": "#/$defs/missing"})"), HasSubstr("resolves to nothing"));
  EXPECT_THAT(Error(R"({"type": "array", "minItems": 3, "maxItems": 2})"), HasSubstr("maxItems"));
  EXPECT_THAT(Error(R"({"properties": {"a": {}}, "required": ["b"]})"), HasSubstr("\"b\""));
  EXPECT_THAT(Error(R"({"type": "strnig"})"), HasSubstr("unknown type 'strnig'"));
  EXPECT_THAT(Error("false"), HasSubstr("matches nothing"));
  EXPECT_THAT(Error("{\"type\": "), HasSubstr("not valid JSON"));
  // Annotations are fine.
  EXPECT_EQ(Error(R"({"title": "T", "description": "d", "type": "integer", "default": 1})"), "");
}

TEST(JsonSchema, DeepSchemasAreAnErrorNotACrash) {
  std::string d200;
  for (int i = 0; i < 200; ++i) d200 += R"({"items": )";
  d200 += "{}" + std::string(200, '}');
  EXPECT_THAT(Error(d200), HasSubstr("nested deeper than 64"));
}

TEST(JsonSchema, JsonObjectGrammar) {
  auto g = CompileGrammar(JsonObjectGbnf());
  ASSERT_TRUE(g.ok()) << g.status();
  auto a = std::make_shared<GrammarAutomaton>(*g, ByteVocab());
  auto accepts = [&](std::string_view t) {
    GrammarMatcher m(a);
    return m.AcceptBytes(t) && m.IsAccepting();
  };
  EXPECT_TRUE(accepts(R"({"a": [1, -0.5, 2e10, "\n", null, false], "b": {"c": {}}})"));
  EXPECT_TRUE(accepts("{}"));
  EXPECT_TRUE(accepts("{} "));
  EXPECT_FALSE(accepts("[]"));
  EXPECT_FALSE(accepts(R"({"a": 01})"));
  EXPECT_FALSE(accepts(R"({"a": "x)"));
  EXPECT_FALSE(accepts(R"({"a" 1})"));
  EXPECT_FALSE(accepts("{\"a\": \"\x01\"}"));
  EXPECT_FALSE(accepts(R"({"a": 1,})"));
}

}  // namespace
}  // namespace pinfer::grammar
