// The tool fields of a chat request, as OpenAI defines them:
//   tools                [{"type": "function", "function": {"name", "description",
//                        "parameters": a JSON schema}}], at most 128, names unique
//   tool_choice          "none", "auto" (the default with tools), "required", or
//                        {"type": "function", "function": {"name": ...}} (one of the tools)
//   parallel_tool_calls  true (the default): an answer forced by "required" may hold several
//                        calls (a named function is called once)
//   chat_template_kwargs vLLM's: extra variables for the chat template (an object)
// and the tool parts of messages: an assistant's "tool_calls" ([{"id", "type": "function",
// "function": {"name", "arguments": JSON text}}], with content null or text) and a "tool"
// message's "tool_call_id" and "name". The legacy function_call field may only say "none" or
// "auto" (use tool_choice to force a call).
#pragma once

#include <optional>

#include "server/chat_template.h"
#include "server/openai_request.h"
#include "server/request_json.h"

namespace pinfer::server {

std::optional<ApiError> ParseToolFields(const request_json::json& j, ParsedRequest* r);

// The tool parts of message `m` (already known to have role `msg->role`) into *msg.
std::optional<ApiError> ParseMessageToolParts(const request_json::json& m, ChatMessage* msg);

inline constexpr int kMaxTools = 128;

}  // namespace pinfer::server
