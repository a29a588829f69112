// Tool calling through the HTTP server with stories260K (built-in ChatML: the Hermes
// syntax): a forced call (a named function, or "required") returns tool_calls whose
// arguments validate against the function's schema, whole and streamed; tool and assistant
// tool-call messages are accepted in the conversation; what cannot be honoured is a 400.
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

const json kWeather = json::parse(R"({"type": "object", "properties": {
  "city": {"type": "string", "maxLength": 16},
  "unit": {"enum": ["celsius", "fahrenheit"]},
  "days": {"type": "integer"}},
  "required": ["city", "unit"], "additionalProperties": false})");
const json kNote = json::parse(R"({"type": "object", "properties": {
  "text": {"type": "string", "maxLength": 20}}, "required": ["text"],
  "additionalProperties": false})");

json Tools() {
  return {
      {{"type", "function"},
       {"function",
        {{"name", "get_weather"}, {"description", "Weather in a city"}, {"parameters", kWeather}}}},
      {{"type", "function"}, {"function", {{"name", "take_note"}, {"parameters", kNote}}}}};
}

json Body(uint64_t seed, json tool_choice) {
  return {{"messages",
           {{{"role", "system"}, {"content", "You help."}},
            {{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
          {"tools", Tools()},
          {"tool_choice", std::move(tool_choice)},
          {"seed", seed},
          {"temperature", 1.0},
          {"max_tokens", 300}};
}

json Named(const std::string& name) {
  return {{"type", "function"}, {"function", {{"name", name}}}};
}

class ServerToolsTest : public testing::ServerFixture {
 protected:
  void SetUp() override { StartStories(2048, 4); }
  json Post(const json& body, int want = 200) {
    return PostJson("/v1/chat/completions", body, want);
  }
};

void ExpectCall(const json& call, const std::string& name) {
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["function"]["name"], name);
  const json& schema = name == "get_weather" ? kWeather : kNote;
  EXPECT_EQ(TextViolation(call["function"]["arguments"].get<std::string>(), schema), "")
      << call.dump();
}

TEST_F(ServerToolsTest, ANamedFunctionIsCalledWithValidArguments) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const json r = Post(Body(seed, Named("get_weather")));
    const json& choice = r["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    EXPECT_TRUE(choice["message"]["content"].is_null()) << r.dump();
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.dump();
    ExpectCall(choice["message"]["tool_calls"][0], "get_weather");
  }
}

TEST_F(ServerToolsTest, StreamedCallsArriveAsDeltas) {
  json body = Body(3, Named("take_note"));
  body["stream"] = true;
  auto r = HttpClient(port_).Post("/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json call = {{"function", {{"arguments", ""}}}};
  std::string finish;
  size_t at = 0;
  while ((at = r.body.find("data: {", at)) != std::string::npos) {
    const size_t end = r.body.find("\n\n", at);
    const json chunk = json::parse(r.body.substr(at + 6, end - at - 6));
    const json& c = chunk["choices"][0];
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    for (const json& d : c["delta"].value("tool_calls", json::array())) {
      EXPECT_EQ(d["index"], 0);
      for (const char* k : {"id", "type"}) {
        if (d.contains(k)) call[k] = d[k];
      }
      if (d["function"].contains("name")) call["function"]["name"] = d["function"]["name"];
      call["function"]["arguments"] =
          call["function"]["arguments"].get<std::string>() + d["function"].value("arguments", "");
    }
    at = end;
  }
  EXPECT_EQ(finish, "tool_calls");
  ExpectCall(call, "take_note");
}

TEST_F(ServerToolsTest, RequiredCallsOneOrSeveral) {
  json body = Body(4, "required");
  body["parallel_tool_calls"] = false;
  json r = Post(body);
  ASSERT_EQ(r["choices"][0]["message"]["tool_calls"].size(), 1u) << r.dump();
  const json& one = r["choices"][0]["message"]["tool_calls"][0];
  ExpectCall(one, one["function"]["name"]);
  // Several calls: a story model keeps calling until max_tokens cuts it (finish_reason
  // length); every call that was completed is returned, and valid.
  body["parallel_tool_calls"] = true;
  body["max_tokens"] = 500;
  r = Post(body);
  const json& calls = r["choices"][0]["message"]["tool_calls"];
  ASSERT_GE(calls.size(), 1u) << r.dump();
  for (const json& c : calls) ExpectCall(c, c["function"]["name"]);
}

TEST_F(ServerToolsTest, ToolMessagesAreAcceptedInTheConversation) {
  json body = Body(5, "auto");
  body["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}}}}}}});
  body["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}});
  body["max_tokens"] = 8;
  const json r = Post(body);
  EXPECT_TRUE(r["choices"][0]["message"]["content"].is_string()) << r.dump();
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 100) << "tools, call and result in the prompt";
}

TEST_F(ServerToolsTest, WhatCannotBeHonouredIsA400) {
  EXPECT_EQ(Post(Body(1, Named("nope")), 400)["error"]["param"], "tool_choice");
  json no_tools = Body(1, "required");
  no_tools.erase("tools");
  EXPECT_EQ(Post(no_tools, 400)["error"]["param"], "tool_choice");
  json both = Body(1, "required");
  both["response_format"] = {{"type", "json_object"}};
  EXPECT_EQ(Post(both, 400)["error"]["param"], "response_format");
  json unsupported = Body(1, Named("get_weather"));
  unsupported["tools"][0]["function"]["parameters"]["properties"]["days"]["minimum"] = 1;
  const json e = Post(unsupported, 400);
  EXPECT_EQ(e["error"]["param"], "tools");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("'minimum'"), std::string::npos);
}

}  // namespace
}  // namespace pinfer::server
