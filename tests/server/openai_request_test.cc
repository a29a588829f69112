#include "server/openai_request.h"

#include <gtest/gtest.h>

namespace pinfer::server {
namespace {

TEST(OpenAiRequestTest, ParsesACompletionWithOpenAiDefaults) {
  ParsedRequest r;
  ASSERT_FALSE(
      ParseRequest(R"({"model":"m","prompt":"Hi","stop":["a","b"],"n":2,"seed":3})", false, &r));
  EXPECT_EQ(r.prompt, "Hi");
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_EQ(r.params.temperature, 1.0f);
  EXPECT_EQ(r.params.top_k, 0);
  EXPECT_EQ(r.params.seed, 3u);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"a", "b"}));
}

TEST(OpenAiRequestTest, ParsesChatMessagesWithTextParts) {
  ParsedRequest r;
  ASSERT_FALSE(ParseRequest(R"({"messages":[{"role":"user","content":[{"type":"text",
      "text":"a"},{"type":"text","text":"b"}]}],"stream":true,
      "stream_options":{"include_usage":true},"max_tokens":5})",
                            true, &r));
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].content, "ab");
  EXPECT_TRUE(r.stream && r.include_usage && r.max_tokens_given);
}

TEST(OpenAiRequestTest, ErrorsNameTheParameter) {
  ParsedRequest r;
  auto e = ParseRequest("{not json", false, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 400);
  e = ParseRequest(R"({"prompt":"x","temperature":3})", false, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "temperature");
  e = ParseRequest(R"({"prompt":"x","frobnicate":1})", false, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "frobnicate");
  e = ParseRequest(R"({"prompt":"x","n":0})", false, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "n");
  e = ParseRequest(R"({"prompt":"x","logprobs":5})", false, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "logprobs");
  e = ParseRequest(R"({"messages":[{"role":"tool","content":"x"}]})", true, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "messages");
  EXPECT_EQ(ErrorJson(*e).find(R"({"error":{)"), 0u);
}

TEST(OpenAiRequestTest, QueueFullIsA503) {
  ApiError e = ErrorFromStatus(absl::ResourceExhaustedError("full"));
  EXPECT_EQ(e.http_status, 503);
  EXPECT_EQ(ErrorFromStatus(absl::InvalidArgumentError("x")).http_status, 400);
}

}  // namespace
}  // namespace pinfer::server
