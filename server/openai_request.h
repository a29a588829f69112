// OpenAI request bodies (/v1/completions, /v1/chat/completions) parsed and checked, and the
// error JSON OpenAI clients expect: {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/sampler.h"
#include "server/chat_template.h"

namespace pinfer::server {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};

std::string ErrorJson(const ApiError& e);
// An engine status as an API error: InvalidArgument 400, ResourceExhausted and Unavailable
// (shutting down) 503, else 500.
ApiError ErrorFromStatus(const absl::Status& s);

struct ParsedRequest {
  bool chat = false;
  std::string model;
  std::string prompt;                 // completions: the prompt text
  std::vector<int32_t> prompt_ids;    // completions: a prompt given as token ids
  std::vector<ChatMessage> messages;  // chat
  SamplingParams params;
  bool max_tokens_given = false;  // otherwise: 16 for completions, the rest of the context for chat
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Parses a JSON body. Unknown parameters, wrong types and out-of-range values are errors
// naming the parameter.
std::optional<ApiError> ParseRequest(const std::string& body, bool chat, ParsedRequest* out);

}  // namespace pinfer::server
