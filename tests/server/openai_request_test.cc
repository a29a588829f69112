#include "server/openai_request.h"

#include <gtest/gtest.h>

#include "engine/param_error.h"

namespace pinfer::server {
namespace {

TEST(OpenAiRequestTest, ParsesACompletionWithOpenAiDefaults) {
  ParsedRequest r;
  ASSERT_FALSE(
      ParseRequest(R"({"model":"m","prompt":"Hi","stop":["a","b"],"n":2,"seed":3})", false, &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "Hi");
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_EQ(r.params.temperature, 1.0f);
  EXPECT_EQ(r.params.top_k, 0);
  EXPECT_EQ(r.params.seed, std::optional<uint64_t>(3));
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
  e = ParseRequest(R"({"prompt":"x","n":0})", false, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "n");
  e = ParseRequest(R"({"prompt":"x","logprobs":50})", false, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "logprobs");
  e = ParseRequest(R"({"messages":[{"role":"function","content":"x"}]})", true, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "messages");
  EXPECT_EQ(ErrorJson(*e).find(R"({"error":{)"), 0u);
}

TEST(OpenAiRequestTest, QueueFullIsA503) {
  ApiError e = ErrorFromStatus(absl::ResourceExhaustedError("full"));
  EXPECT_EQ(e.http_status, 503);
  EXPECT_EQ(ErrorFromStatus(absl::InvalidArgumentError("x")).http_status, 400);
}

TEST(OpenAiRequestTest, AnErrorsParamIsTheOneItsStatusNames) {
  const ApiError named = ErrorFromStatus(InvalidParamError("n", "n = 9 is too many"));
  EXPECT_EQ(named.http_status, 400);
  EXPECT_EQ(named.param, "n");
  EXPECT_EQ(ErrorFromStatus(absl::InvalidArgumentError("n = 9 is too many")).param, "");
}

TEST(OpenAiRequestTest, UnknownFieldsAreAcceptedAndNamed) {
  ParsedRequest r;
  ASSERT_FALSE(ParseRequest(
      R"({"prompt":"x","frobnicate":1,"metadata":{"a":"b"},"store":true,"user":"u",
          "tools":[{"type":"function","function":{"name":"f","parameters":{}}}],
          "tool_choice":"auto","parallel_tool_calls":true,
          "response_format":{"type":"text"}})",
      false, &r));
  EXPECT_EQ(r.ignored, (std::vector<std::string>{"frobnicate", "metadata", "parallel_tool_calls",
                                                 "store", "tools", "user"}));
  // A request with only known fields ignores nothing.
  ASSERT_FALSE(ParseRequest(R"({"prompt":"x","max_tokens":3})", false, &r));
  EXPECT_TRUE(r.ignored.empty());
}

TEST(OpenAiRequestTest, WhatCannotBeHonouredIsA400NamingIt) {
  ParsedRequest r;
  auto param = [&](const std::string& body, bool chat) {
    auto e = ParseRequest(body, chat, &r);
    return e ? e->param : std::string("(accepted)");
  };
  EXPECT_EQ(param(R"({"prompt":"x","n":1,"best_of":3})", false), "best_of");
  EXPECT_EQ(param(R"({"prompt":"x","suffix":"tail"})", false), "suffix");
  EXPECT_EQ(param(R"({"prompt":"x","echo":true,"logprobs":1})", false), "echo");
  EXPECT_EQ(param(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})", true),
            "tool_choice");
  EXPECT_EQ(param(R"({"messages":[{"role":"user","content":"x"}],
                     "response_format":{"type":"json_schema","json_schema":{"name":"x",
                     "schema":{"type":"string","format":"email"}}}})",
                  true),
            "response_format");
  EXPECT_EQ(param(R"({"messages":[{"role":"user","content":[{"type":"image_url",
                     "image_url":{"url":"http://x/a.png"}}]}]})",
                  true),
            "messages");
  EXPECT_EQ(param(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", true),
            "top_logprobs");
  EXPECT_EQ(param(R"({"prompt":"x","repetition_penalty":1.1,"repeat_penalty":1.1})", false),
            "repeat_penalty");
  EXPECT_EQ(param(R"({"prompt":"x","logit_bias":{"abc":1}})", false), "logit_bias");
  EXPECT_EQ(param(R"({"prompt":"x","logit_bias":{"5":-101}})", false), "logit_bias");
  EXPECT_EQ(param(R"({"prompt":"x","presence_penalty":2.5})", false), "presence_penalty");
}

TEST(OpenAiRequestTest, SamplingFieldsReachTheParams) {
  ParsedRequest r;
  ASSERT_FALSE(ParseRequest(
      R"({"prompt":"x","presence_penalty":0.5,"frequency_penalty":-0.25,
          "logit_bias":{"7":-100,"9":2.5},"logprobs":3,"max_completion_tokens":9})",
      false, &r));
  EXPECT_FLOAT_EQ(r.params.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.params.frequency_penalty, -0.25f);
  EXPECT_EQ(r.params.logit_bias, (std::vector<std::pair<int32_t, float>>{{7, -100.0f}, {9, 2.5f}}));
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_EQ(r.params.max_tokens, 9);
  EXPECT_FALSE(r.params.seed.has_value());  // no seed: the engine draws one
  // vLLM's repetition_penalty looks at the whole sequence, llama.cpp's repeat_penalty at the
  // last 64 tokens (or repeat_last_n).
  ASSERT_FALSE(ParseRequest(R"({"prompt":"x","repetition_penalty":1.2})", false, &r));
  EXPECT_FLOAT_EQ(r.params.repetition_penalty, 1.2f);
  EXPECT_EQ(r.params.repeat_last_n, -1);
  ASSERT_FALSE(ParseRequest(R"({"prompt":"x","repeat_penalty":1.3})", false, &r));
  EXPECT_EQ(r.params.repeat_last_n, 64);
  ASSERT_FALSE(
      ParseRequest(R"({"prompt":"x","repeat_penalty":1.3,"repeat_last_n":16})", false, &r));
  EXPECT_EQ(r.params.repeat_last_n, 16);
  // Chat: logprobs is a boolean, top_logprobs the alternatives.
  ASSERT_FALSE(ParseRequest(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,
      "top_logprobs":4})",
                            true, &r));
  EXPECT_EQ(r.params.logprobs, 4);
  ASSERT_FALSE(
      ParseRequest(R"({"messages":[{"role":"user","content":"x"}],"logprobs":false})", true, &r));
  EXPECT_EQ(r.params.logprobs, -1);
}

TEST(OpenAiRequestTest, AListOfPrompts) {
  ParsedRequest r;
  ASSERT_FALSE(ParseRequest(R"({"prompt":["a","b",[1,2,3]],"n":2,"echo":true})", false, &r));
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_EQ(r.prompts[1].text, "b");
  EXPECT_TRUE(r.prompts[2].is_ids);
  EXPECT_EQ(r.prompts[2].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(r.echo);
  ASSERT_FALSE(ParseRequest(R"({"prompt":[5,6]})", false, &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_ids);
}

}  // namespace
}  // namespace pinfer::server
