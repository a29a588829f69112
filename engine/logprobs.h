// Log-probabilities of a sampled token for the API's logprobs / top_logprobs: the
// log-softmax of the raw logits the model produced for that position, before logit_bias,
// penalties, temperature and top-k/top-p/min-p (vLLM's default, logprobs_mode
// "raw_logprobs"), so they describe the model, not the sampler's settings.
#pragma once

#include <cstdint>
#include <vector>

namespace pinfer {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;  // natural log
};

struct SampledLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // the top_k most likely, best first (ties: lower id first)
};

// logits: [n_vocab]. chosen in [0, n_vocab); top_k in [0, n_vocab]. Sums run in double.
SampledLogprobs ComputeLogprobs(const float* logits, int n_vocab, int32_t chosen, int top_k);

}  // namespace pinfer
