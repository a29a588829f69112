// OpenAI request bodies (/v1/completions, /v1/chat/completions) parsed and checked, and the
// error JSON OpenAI clients expect: {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/grammar/grammar.h"
#include "engine/sampler.h"
#include "server/chat_template.h"
#include "server/tool_calls.h"

namespace pinfer::server {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};

std::string ErrorJson(const ApiError& e);
// A status as an API error: InvalidArgument 400, ResourceExhausted and Unavailable
// (shutting down) 503, else 500; param is the parameter the status names as data
// (InvalidParamError / ParamOf, engine/param_error.h), never read from its message.
ApiError ErrorFromStatus(const absl::Status& s);

// One prompt of a completions request: text (encoded with BOS) or token ids as given.
struct PromptInput {
  std::string text;
  std::vector<int32_t> ids;
  bool is_ids = false;
};

// tool_choice (server/request_tools.h).
enum class ToolChoice { kNone, kAuto, kRequired, kFunction };

struct ParsedRequest {
  bool chat = false;
  std::string model;
  // completions: one or more prompts; the choices of prompt p are numbered p * n + i, as
  // OpenAI numbers them.
  std::vector<PromptInput> prompts;
  std::vector<ChatMessage> messages;  // chat
  SamplingParams params;
  bool max_tokens_given = false;  // otherwise: 16 for completions, the rest of the context for chat
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt's text before each completion
  // The output's grammar (server/request_grammar.h), compiled; null when unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar;
  std::string grammar_field;  // the field it came from (response_format, guided_json, ...)
  // Chat tools (server/request_tools.h): as given (an array; null: none) for the template,
  // their functions, the choice and whether a forced answer may hold several calls.
  nlohmann::ordered_json tools;
  std::vector<ToolSpec> tool_specs;
  ToolChoice tool_choice = ToolChoice::kNone;
  std::string tool_function;  // kFunction: the function named
  bool parallel_tool_calls = true;
  nlohmann::ordered_json chat_template_kwargs;  // an object, or null
  // Fields accepted that change nothing here: unknown ones (vLLM's rule: accepted, and named
  // in the X-Ignored-Fields response header and the log) and OpenAI's that have no effect on
  // generation here (user, metadata, store, ...). Sorted.
  std::vector<std::string> ignored;
};

// Parses a JSON body. Wrong types, out-of-range values and fields that would need what this
// server cannot do (best_of > n, image parts, suffix, echo with logprobs, a grammar or
// schema feature the compiler does not support) are errors naming the parameter; unknown
// fields are listed in `ignored`.
std::optional<ApiError> ParseRequest(const std::string& body, bool chat, ParsedRequest* out);

}  // namespace pinfer::server
