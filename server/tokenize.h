// /tokenize and /detokenize in llama-server's shapes (vLLM's request spelling accepted too):
//   POST /tokenize   {"content": "text", "add_special": false, "parse_special": true,
//                     "with_pieces": false}
//     -> {"tokens": [ids]}, or with_pieces {"tokens": [{"id": 1, "piece": "text" or [bytes]}]};
//     also "count" and "max_model_len", as vLLM answers ("prompt" is vLLM's name of content).
//   POST /detokenize {"tokens": [ids]} -> {"content": "text"}
#pragma once

#include <optional>
#include <string>

#include "loaders/tokenizer.h"
#include "server/openai_request.h"

namespace pinfer::server {

// The response body into *out, or the error naming the parameter.
std::optional<ApiError> TokenizeBody(const std::string& body, const Tokenizer& tok,
                                     int max_model_len, std::string* out);
std::optional<ApiError> DetokenizeBody(const std::string& body, const Tokenizer& tok,
                                       std::string* out);

}  // namespace pinfer::server
