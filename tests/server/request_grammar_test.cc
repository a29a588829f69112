// The request fields that constrain the output (server/request_grammar.h): each of
// OpenAI's, vLLM's and llama-server's forms compiles to a grammar that accepts what the
// field means and refuses the rest; faults and unsupported features are 400s naming the
// field and the feature; two constraints at once are refused.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/openai_request.h"
#include "tests/testing/grammar_testing.h"

namespace pinfer::server {
namespace {

using ::testing::HasSubstr;

// The grammar a chat body's fields compile to, and which field it came from.
struct Parsed {
  std::shared_ptr<const grammar::Grammar> grammar;
  std::string field;
  bool Accepts(const std::string& text) const { return pinfer::testing::Accepts(grammar, text); }
};

Parsed Parse(const std::string& fields) {
  ParsedRequest r;
  const std::string body = R"({"messages":[{"role":"user","content":"x"}],)" + fields + "}";
  auto e = ParseRequest(body, /*chat=*/true, &r);
  EXPECT_FALSE(e) << fields << ": " << (e ? e->message : "");
  EXPECT_NE(r.grammar, nullptr) << fields;
  EXPECT_TRUE(r.ignored.empty()) << fields;
  return {r.grammar, r.grammar_field};
}

ApiError Refused(const std::string& fields) {
  ParsedRequest r;
  auto e = ParseRequest(R"({"prompt":"x",)" + fields + "}", /*chat=*/false, &r);
  EXPECT_TRUE(e.has_value()) << fields << " was accepted";
  return e.value_or(ApiError{});
}

const char* kSchema =
    R"({"type":"object","properties":{"n":{"type":"integer"},"s":{"enum":["a","b"]}},
        "required":["n","s"],"additionalProperties":false})";

TEST(RequestGrammar, EveryFormCompilesToWhatItMeans) {
  const std::string schema = kSchema;
  for (
      const std::string& f :
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":)" +
           schema + "}}",
       R"("response_format":{"type":"json_object","schema":)" + schema + "}",
       R"("guided_json":)" + schema, R"("json_schema":)" + schema,
       R"("structured_outputs":{"json":)" + schema + "}"}) {
    const Parsed p = Parse(f);
    EXPECT_TRUE(p.Accepts(R"({"n": 42, "s": "b"})")) << f;
    EXPECT_FALSE(p.Accepts(R"({"n": 42})")) << f;
    EXPECT_FALSE(p.Accepts(R"({"n": 4.5, "s": "a"})")) << f;
  }
  // Properties keep the schema's order (bodies are parsed in order).
  EXPECT_FALSE(Parse(R"("guided_json":)" + schema).Accepts(R"({"s": "a", "n": 1})"));
  // guided_json as text.
  EXPECT_TRUE(Parse(R"("guided_json":"{\"type\":\"integer\"}")").Accepts("-17"));
  for (const char* f : {R"("response_format":{"type":"json_object"})",
                        R"("structured_outputs":{"json_object":true})"}) {
    const Parsed p = Parse(f);
    EXPECT_TRUE(p.Accepts(R"({"any": [1, {"x": null}]})")) << f;
    EXPECT_FALSE(p.Accepts("[1]")) << f;
  }
  const Parsed choice = Parse(R"("guided_choice":["yes","no","maybe so"])");
  EXPECT_EQ(choice.field, "guided_choice");
  EXPECT_TRUE(choice.Accepts("maybe so"));
  EXPECT_FALSE(choice.Accepts("maybe"));
  const Parsed regex = Parse(R"("guided_regex":"\\d{3}-[A-Z]{2}")");
  EXPECT_TRUE(regex.Accepts("123-AB"));
  EXPECT_FALSE(regex.Accepts("12-AB"));
  for (const char* f :
       {R"("guided_grammar":"root ::= \"x\" [0-9]+")", R"("grammar":"root ::= \"x\" [0-9]+")",
        R"("structured_outputs":{"grammar":"root ::= \"x\" [0-9]+"})"}) {
    const Parsed p = Parse(f);
    EXPECT_TRUE(p.Accepts("x12")) << f;
    EXPECT_FALSE(p.Accepts("y")) << f;
  }
}

TEST(RequestGrammar, TextFormatsAndEmptyGrammarsConstrainNothing) {
  ParsedRequest r;
  ASSERT_FALSE(
      ParseRequest(R"({"prompt":"x","response_format":{"type":"text"},"grammar":""})", false, &r));
  EXPECT_EQ(r.grammar, nullptr);
}

TEST(RequestGrammar, FaultsAreA400NamingTheFieldAndTheFeature) {
  struct Case {
    std::string fields, param, says;
  };
  const std::vector<Case> cases = {
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":
           {"type":"string","pattern":"^a+$"}}})",
       "response_format", "keyword 'pattern'"},
      {R"("guided_json":{"type":"object","properties":{"a":{"type":"integer","minimum":0}}})",
       "guided_json", "keyword 'minimum' at '/properties/a'"},
      {R"("guided_regex":"(a)\\1")", "guided_regex", "backreference"},
      {R"("guided_regex":"(?=x)y")", "guided_regex", "lookaround"},
      {R"("grammar":"root ::= undefined-rule")", "grammar", "undefined-rule"},
      {R"("guided_grammar":"root ::= \"x")", "guided_grammar", "guided_grammar"},
      {R"("guided_choice":[])", "guided_choice", "non-empty list"},
      {R"("guided_choice":["a",1])", "guided_choice", "strings"},
      {R"("response_format":{"type":"yaml"})", "response_format", "'yaml' is not supported"},
      {R"("response_format":{"type":"json_schema"})", "response_format", "json_schema object"},
      {R"("guided_json":"{not json")", "guided_json", "not valid JSON"},
      {R"("structured_outputs":{"json":{},"regex":"a"})", "structured_outputs", "exactly one"},
      {R"("grammar":"root ::= \"a\"","guided_regex":"b")", "grammar",
       "guided_regex and grammar both constrain the output"},
      {R"("response_format":{"type":"json_object"},"guided_choice":["a"])", "guided_choice",
       "response_format and guided_choice"},
  };
  for (const Case& c : cases) {
    const ApiError e = Refused(c.fields);
    EXPECT_EQ(e.http_status, 400) << c.fields;
    EXPECT_EQ(e.param, c.param) << c.fields;
    EXPECT_THAT(e.message, HasSubstr(c.says)) << c.fields;
  }
}

}  // namespace
}  // namespace pinfer::server
