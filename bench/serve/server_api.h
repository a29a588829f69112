// The few server endpoints bench-serve uses besides the completions it measures: the model
// id (GET /v1/models, OpenAI's shape) and the tokenizer (POST /tokenize at the server's root,
// llama-server's shape: {"content", "add_special"} -> {"tokens": [ids]}, which pagedinfer
// serve answers in the same shape).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "bench/serve/prompts.h"
#include "bench/serve/url.h"

namespace pinfer::bench_serve {

// The first model /v1/models lists.
absl::StatusOr<std::string> FirstModelId(const BaseUrl& url, const std::string& api_key);

// Waits until GET /v1/models answers 200 (a server still loading refuses connections or
// answers 503), polling every poll_s, for at most timeout_s seconds (vLLM's
// --ready-check-timeout-sec). DeadlineExceeded with the last answer or error when it never
// did; FailedPrecondition at once for a 401/403/404 (waiting would not change them).
absl::Status WaitUntilReady(const BaseUrl& url, const std::string& api_key, double timeout_s,
                            double poll_s = 1.0);

// /tokenize beside the base URL's /v1 (a base path ending in /v1 loses it). Its calls fail
// with NotFound when the server has no /tokenize.
TokenizeFn ServerTokenizer(const BaseUrl& url, const std::string& api_key);

// The "tokens" of a /tokenize answer: ids, or {"id": ...} objects (with_pieces).
absl::StatusOr<std::vector<int32_t>> ParseTokenizeReply(const std::string& body);

}  // namespace pinfer::bench_serve
