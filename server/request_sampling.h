// The sampling fields of a completions or chat request, each group in a function of its own
// (ParseRequest runs them in turn), written into SamplingParams (engine/sampler.h says what
// each does):
//   temperature, top_p, top_k, min_p, seed, ignore_eos
//   presence_penalty, frequency_penalty (OpenAI: over the output), repetition_penalty (vLLM:
//   the whole sequence), repeat_penalty + repeat_last_n (llama.cpp: the last 64 tokens)
//   logit_bias: {"token id": bias in -100..100} (or llama.cpp's [[id, bias], ...])
//   logprobs: completions an integer 0..20; chat a boolean, with top_logprobs 0..20
#pragma once

#include <optional>

#include "engine/sampler.h"
#include "nlohmann/json.hpp"
#include "server/openai_request.h"
#include "server/request_json.h"

namespace pinfer::server {

std::optional<ApiError> ParseSampling(const request_json::json& j, SamplingParams* p);
std::optional<ApiError> ParsePenalties(const request_json::json& j, SamplingParams* p);
std::optional<ApiError> ParseLogitBias(const request_json::json& j, SamplingParams* p);
std::optional<ApiError> ParseLogprobs(const request_json::json& j, bool chat, SamplingParams* p);

// The most top_logprobs / logprobs alternatives a request may ask for (vLLM's default).
inline constexpr int kMaxTopLogprobs = 20;

}  // namespace pinfer::server
