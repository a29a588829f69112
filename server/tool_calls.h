// Tool calls in a model's answer, in the syntaxes of the model families users run, and the
// pieces of text and grammar that go with them:
//   kHermes   <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, one block per
//             call, text around them is content (Qwen2.5, Qwen3, Hermes; ChatML templates)
//   kLlama3   the whole answer is {"name": "f", "parameters": {...}} ("arguments" accepted
//             too), optionally after <|python_tag|>; several calls separated by ';'
//             (Llama 3.1-3.3 JSON tool calling)
//   kMistral  [TOOL_CALLS] then [{"name": "f", "arguments": {...}}, ...]; text before the
//             marker is content; a bare array (a forced call, which cannot spell the control
//             token) is read the same way
// A call is kept only when its JSON parses and it names one of the request's tools; anything
// else stays content, so a model that merely talks about a tool is not misread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/chat_template.h"

namespace pinfer::server {

enum class ToolSyntax { kHermes, kLlama3, kMistral };
const char* ToolSyntaxName(ToolSyntax s);  // "hermes", "llama3-json", "mistral"

// The syntax a chat template's model writes: from the markers its Jinja source mentions
// (<tool_call>, [TOOL_CALLS], <|python_tag|> or ipython), else from the family (Llama 3:
// kLlama3, Mistral: kMistral, others: kHermes).
ToolSyntax ToolSyntaxFor(std::string_view jinja_source, ChatTemplate family);

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text of an object, compact, keys in the model's order
};

struct ParsedAnswer {
  std::string content;  // the text outside calls, trimmed when there are calls
  std::vector<ToolCall> calls;
};

// text: the answer with its control tokens spelled out (<|python_tag|>, [TOOL_CALLS]).
ParsedAnswer ParseToolCalls(std::string_view text, ToolSyntax syntax,
                            const std::vector<std::string>& tool_names);

// Streaming: the first position of `text` from which a call may begin (a marker, the start
// of a marker cut off at the end, or for kLlama3 and kMistral an answer whose first
// non-space character opens JSON); text.size() when none. Text before it is content.
size_t ToolCallStart(std::string_view text, ToolSyntax syntax);

// One function of the request's tools.
struct ToolSpec {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters;  // a JSON schema; null: any object
};

// GBNF of an answer that is exactly one call (or, parallel and the syntax allows it, one or
// more) of one of `tools`, with arguments that match the function's schema. InvalidArgument
// naming the tool when its schema uses what the schema compiler does not support.
absl::StatusOr<std::string> ForcedCallGbnf(ToolSyntax syntax, const std::vector<ToolSpec>& tools,
                                           bool parallel);

// For the built-in templates, which do not render tools themselves: the system text that
// describes the tools and how to call them, and an assistant message's calls as the model
// would have written them.
std::string ToolSystemText(ToolSyntax syntax, const nlohmann::ordered_json& tools);
std::string CallsText(ToolSyntax syntax, const nlohmann::ordered_json& tool_calls);

}  // namespace pinfer::server
