// Tool calls in answers (server/tool_calls.h, tool_answer.h): each family's syntax read into
// calls with the text around them as content; what is not a valid call of a known tool stays
// content; streamed content stops where a call may begin; a forced call's grammar accepts
// exactly the calls whose arguments match the function's schema.
#include "server/tool_calls.h"

#include <memory>
#include <string>
#include <vector>

#include "engine/param_error.h"
#include "gtest/gtest.h"
#include "server/tool_answer.h"
#include "tests/testing/grammar_testing.h"
#include "tests/testing/test_tokenizers.h"

namespace pinfer::server {
namespace {

using json = nlohmann::ordered_json;
const std::vector<std::string> kNames = {"get_weather", "add"};

TEST(ToolCallsTest, HermesBlocksAndTheTextAroundThem) {
  const ParsedAnswer a = ParseToolCalls(
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": "
      "1}\"}</tool_call>",
      ToolSyntax::kHermes, kNames);
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(a.calls[1].arguments, R"({"a":1})");
  EXPECT_EQ(a.content, "Let me look.");
  // An unknown function, broken JSON: text, not calls.
  for (const char* text :
       {"<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"add\", \"arguments\": {</tool_call>", "no calls here"}) {
    const ParsedAnswer b = ParseToolCalls(text, ToolSyntax::kHermes, kNames);
    EXPECT_TRUE(b.calls.empty()) << text;
    EXPECT_EQ(b.content, text);
  }
  // A last block the model did not close still counts.
  EXPECT_EQ(ParseToolCalls("<tool_call>{\"name\": \"add\", \"arguments\": {}}", ToolSyntax::kHermes,
                           kNames)
                .calls.size(),
            1u);
}

TEST(ToolCallsTest, Llama3JsonAndMistralMarkers) {
  ParsedAnswer a = ParseToolCalls(
      " <|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; "
      "{\"name\": \"add\", \"parameters\": {}}",
      ToolSyntax::kLlama3, kNames);
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_TRUE(ParseToolCalls("The answer is {1}.", ToolSyntax::kLlama3, kNames).calls.empty());
  a = ParseToolCalls(
      "Sure.[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 2}}, {\"name\": "
      "\"get_weather\", \"arguments\": {}}]",
      ToolSyntax::kMistral, kNames);
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.content, "Sure.");
  a = ParseToolCalls("[{\"name\": \"add\", \"arguments\": {}}]", ToolSyntax::kMistral, kNames);
  EXPECT_EQ(a.calls.size(), 1u) << "a forced call's bare array";
}

TEST(ToolCallsTest, StreamedContentStopsWhereACallMayBegin) {
  EXPECT_EQ(ToolCallStart("Hello <tool_ca", ToolSyntax::kHermes), 6u);
  EXPECT_EQ(ToolCallStart("Hello <b>", ToolSyntax::kHermes), 9u);
  EXPECT_EQ(ToolCallStart("  {\"name\"", ToolSyntax::kLlama3), 0u);
  EXPECT_EQ(ToolCallStart("Paris is", ToolSyntax::kLlama3), 8u);
  EXPECT_EQ(ToolCallStart("ok [TOOL_", ToolSyntax::kMistral), 3u);
  auto tok = pinfer::testing::ChatMlTokenizer();
  ToolAnswer answer(*tok, ToolSyntax::kHermes, kNames);
  EXPECT_EQ(answer.Push("I will <tool", {}), "I will ");
  EXPECT_EQ(answer.Push("_call>{\"name\": \"add\", \"arguments\": {}}</tool_call>", {}), "");
  const ParsedAnswer end = answer.Finish();
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.content, "");
}

bool Accepts(const absl::StatusOr<std::string>& gbnf, const std::string& text) {
  EXPECT_TRUE(gbnf.ok()) << gbnf.status();
  return gbnf.ok() && pinfer::testing::AcceptsGbnf(*gbnf, text);
}

TEST(ToolCallsTest, ForcedCallGrammarsFollowTheFunctionsSchemas) {
  std::vector<ToolSpec> tools(2);
  tools[0].name = "get_weather";
  tools[0].parameters = json::parse(
      R"({"type": "object", "properties": {"city": {"type": "string"},
          "unit": {"enum": ["c", "f"]}}, "required": ["city"]})");
  tools[1].name = "add";  // no parameters: any object
  auto one = ForcedCallGbnf(ToolSyntax::kHermes, tools, /*parallel=*/false);
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
      "\"c\"}}\n</tool_call>";
  EXPECT_TRUE(Accepts(one, call));
  EXPECT_TRUE(
      Accepts(one, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"x\": [1]}}\n</tool_call>"));
  EXPECT_FALSE(Accepts(one, call + "\n" + call));
  EXPECT_FALSE(Accepts(one,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": "
                       "\"c\"}}\n</tool_call>"));  // city is required
  auto many = ForcedCallGbnf(ToolSyntax::kHermes, tools, /*parallel=*/true);
  EXPECT_TRUE(Accepts(many, call + "\n" + call));
  auto llama = ForcedCallGbnf(ToolSyntax::kLlama3, tools, true);
  EXPECT_TRUE(Accepts(llama, "{\"name\": \"add\", \"parameters\": {}}"));
  auto mistral = ForcedCallGbnf(ToolSyntax::kMistral, tools, true);
  EXPECT_TRUE(Accepts(mistral,
                      "[{\"name\": \"add\", \"arguments\": {}}, {\"name\": \"add\", "
                      "\"arguments\": {}}]"));
  tools[1].parameters = json::parse(R"({"type": "integer", "minimum": 3})");
  auto bad = ForcedCallGbnf(ToolSyntax::kHermes, tools, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tool 'add' parameters: json_schema: keyword 'minimum'"),
            std::string::npos)
      << bad.status();
  EXPECT_EQ(ParamOf(bad.status()), "tools");  // the server's error.param
}

}  // namespace
}  // namespace pinfer::server
