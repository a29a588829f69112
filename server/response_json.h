// Pieces of OpenAI response bodies that several handlers build: logprobs in the legacy
// completions shape and in the chat shape, usage with cached prompt tokens, unique ids, the
// system fingerprint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/logprobs.h"
#include "loaders/tokenizer.h"
#include "nlohmann/json.hpp"

namespace pinfer::server {

// True when s is well-formed UTF-8.
bool IsValidUtf8(const std::string& s);

// A token's text as OpenAI shows it: its bytes when they are valid UTF-8, else
// "bytes:\xe2\x80" (the escaped bytes), as OpenAI writes partial characters. Control tokens
// show their piece ("<|im_end|>").
std::string TokenText(const Tokenizer& tok, int32_t id);

// The legacy completions shape for a run of tokens:
// {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{text: logprob}, ...],
//  "text_offset": [...]}; *offset is the text offset of the first token and is advanced past
// the last (offsets count bytes of the choice's text, as the tokens' texts add up).
nlohmann::json CompletionLogprobs(const Tokenizer& tok, const std::vector<SampledLogprobs>& lps,
                                  size_t* offset);

// The chat shape: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}],
// "refusal": null}.
nlohmann::json ChatLogprobs(const Tokenizer& tok, const std::vector<SampledLogprobs>& lps);

// usage: prompt, completion and total tokens, and prompt_tokens_details.cached_tokens (the
// prompt tokens the prefix cache served).
nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);

// "<prefix>" + 32 random hex digits (a random 128-bit id, never repeated across restarts).
std::string RandomId(const std::string& prefix);

// "fp_" + 12 hex digits naming what answers: the build, the model's file and weight format,
// the KV format. The same server configuration gives the same fingerprint.
std::string SystemFingerprint(const std::string& model_path, const std::string& weight_format,
                              const std::string& kv_format);

}  // namespace pinfer::server
