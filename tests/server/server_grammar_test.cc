// Constrained output through the HTTP server with stories260K (a story model that knows
// nothing of JSON): response_format json_schema on /v1/chat/completions and a GBNF grammar
// on /v1/completions give answers that parse and validate in 20 of 20 seeded requests, while
// the same requests without the constraint do not parse; streamed answers and n > 1 too;
// a schema feature the compiler lacks is a 400 naming it.
#include <regex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/openai_server.h"
#include "tests/server/server_fixture.h"
#include "tests/testing/json_schema_check.h"
#include "tests/testing/test_models.h"

namespace pinfer::server {
namespace {

using json = nlohmann::json;
using pinfer::testing::HttpClient;
using pinfer::testing::TextViolation;

const char* kSchema = pinfer::testing::kStorySchema;

// The same objects in GBNF, written by hand for /v1/completions' grammar field.
const char* kGbnf =
    R"(root ::= "{" ws "\"name\": " str20 "," ws "\"age\": " int "," ws mood "," ws tags ws "}"
mood ::= "\"mood\": " ( "\"happy\"" | "\"sad\"" | "\"sleepy\"" )
str20 ::= "\"" [a-zA-Z ,.!']{0,20} "\""
int ::= "-"? ( "0" | [1-9] [0-9]{0,5} )
tags ::= "\"tags\": [" ( str12 ( ", " str12 ){0,2} )? "]"
str12 ::= "\"" [a-zA-Z ,.!']{0,12} "\""
ws ::= " "?
)";

class ServerGrammarTest : public testing::ServerFixture {
 protected:
  void SetUp() override { StartStories(512, 8); }
  // For seeds 1..20: the answer's text to `make(seed, constrained)` through `path`, read by
  // `text(response, constrained)`; how many constrained answers validate and how many
  // unconstrained ones parse.
  template <typename Make, typename Text>
  std::pair<int, int> Tally(const std::string& path, Make make, Text text) {
    const json schema = json::parse(kSchema);
    int valid = 0, parsed_free = 0;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      const std::string got = text(PostJson(path, make(seed, true)), true);
      const std::string why = TextViolation(got, schema);
      EXPECT_EQ(why, "") << "seed " << seed;
      valid += why.empty();
      const std::string free = text(PostJson(path, make(seed, false)), false);
      parsed_free += !json::parse(free, nullptr, false).is_discarded();
    }
    return {valid, parsed_free};
  }
};

json ChatBody(uint64_t seed) {
  return {{"messages", {{{"role", "user"}, {"content", "Tell me about Lily, as JSON."}}}},
          {"seed", seed},
          {"max_tokens", 300},
          {"temperature", 1.0}};
}

TEST_F(ServerGrammarTest, ChatJsonSchemaAnswersValidateInEverySeededRequest) {
  auto make = [](uint64_t seed, bool constrained) {
    json body = ChatBody(seed);
    if (constrained) {
      body["response_format"] = {
          {"type", "json_schema"},
          {"json_schema",
           {{"name", "friend"}, {"strict", true}, {"schema", json::parse(kSchema)}}}};
    }
    return body;
  };
  auto [valid, parsed_free] = Tally("/v1/chat/completions", make, [](const json& r, bool c) {
    // A constrained answer ends where the grammar does; a free one runs to max_tokens.
    if (c) {
      EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
    }
    return r["choices"][0]["message"]["content"].get<std::string>();
  });
  std::printf("chat json_schema: %d of 20 valid; unconstrained: %d of 20 parse\n", valid,
              parsed_free);
  EXPECT_EQ(valid, 20);
  EXPECT_EQ(parsed_free, 0);
}

TEST_F(ServerGrammarTest, CompletionsGrammarAnswersValidateInEverySeededRequest) {
  auto make = [](uint64_t seed, bool constrained) {
    json body = {{"prompt", "Lily's friend, as JSON:"},
                 {"seed", seed},
                 {"max_tokens", 200},
                 {"temperature", 1.0}};
    if (constrained) body["grammar"] = kGbnf;
    return body;
  };
  auto [valid, parsed_free] = Tally("/v1/completions", make, [](const json& r, bool) {
    return r["choices"][0]["text"].get<std::string>();
  });
  std::printf("completions grammar: %d of 20 valid; unconstrained: %d of 20 parse\n", valid,
              parsed_free);
  EXPECT_EQ(valid, 20);
  EXPECT_EQ(parsed_free, 0);
}

// A streamed answer's deltas put together, and each of n = 3 choices, follow the schema.
TEST_F(ServerGrammarTest, StreamedAndSeveralChoicesFollowTheSchema) {
  const json schema = json::parse(kSchema);
  json body = ChatBody(5);
  body["guided_json"] = schema;
  body["stream"] = true;
  auto r = HttpClient(port_).Post("/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  std::string text;
  size_t at = 0;
  while ((at = r.body.find("data: {", at)) != std::string::npos) {
    const size_t end = r.body.find("\n\n", at);
    const json chunk = json::parse(r.body.substr(at + 6, end - at - 6));
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content")) text += delta["content"].get<std::string>();
    at = end;
  }
  EXPECT_EQ(TextViolation(text, schema), "") << text;
  body.erase("stream");
  body["n"] = 3;
  const json got = PostJson("/v1/chat/completions", body);
  ASSERT_EQ(got["choices"].size(), 3u);
  for (const json& c : got["choices"]) {
    EXPECT_EQ(TextViolation(c["message"]["content"].get<std::string>(), schema), "");
  }
}

TEST_F(ServerGrammarTest, ChoiceAndRegexAnswers) {
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 1.0}};
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    body["seed"] = seed;
    body.erase("guided_regex");
    body["guided_choice"] = {"happy", "sad", "very sleepy"};
    const std::string choice = PostJson("/v1/completions", body)["choices"][0]["text"];
    EXPECT_TRUE(choice == "happy" || choice == "sad" || choice == "very sleepy") << choice;
    body.erase("guided_choice");
    body["guided_regex"] = "[A-Z][a-z]{2,8} (is|was) [0-9]{1,2}";
    const std::string text = PostJson("/v1/completions", body)["choices"][0]["text"];
    EXPECT_TRUE(std::regex_match(text, std::regex("[A-Z][a-z]{2,8} (is|was) [0-9]{1,2}"))) << text;
  }
}

TEST_F(ServerGrammarTest, UnsupportedSchemaFeatureIsA400NamingIt) {
  json body = ChatBody(1);
  body["response_format"] = {
      {"type", "json_schema"},
      {"json_schema",
       {{"name", "x"},
        {"schema",
         {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}, {"minimum", 0}}}}}}}}}};
  const json e = PostJson("/v1/chat/completions", body, 400);
  EXPECT_EQ(e["error"]["param"], "response_format");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("'minimum'"), std::string::npos)
      << e.dump();
}

}  // namespace
}  // namespace pinfer::server
