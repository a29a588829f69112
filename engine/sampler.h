// Chooses the next token from logits: greedy, or temperature sampling after repetition
// penalty, top-k, top-p and min-p filtering (in that order, as llama.cpp's default chain).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pinfer {

struct SamplingParams {
  float temperature = 0.8f;         // <= 0: greedy (the highest logit; ties to the lower id)
  int top_k = 40;                   // <= 0: off
  float top_p = 0.95f;              // 1: off
  float min_p = 0.05f;              // 0: off; keeps tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;  // 1: off; divides positive logits of recent tokens
  int repeat_last_n = 64;           // how many recent tokens the penalty looks at
  uint64_t seed = 0;
  int max_tokens = 128;           // tokens to generate
  std::vector<std::string> stop;  // stop strings (checked on the decoded text)
  bool ignore_eos = false;

  // InvalidArgument naming the parameter when a value is out of range.
  absl::Status Validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // logits: [n_vocab] raw scores, read only (the caller's row stays as the model wrote it, so
  // forks of one sequence sample from the same row). history: tokens so far (prompt and
  // output), for the repetition penalty. Returns a token id in [0, n_vocab).
  int32_t Sample(const float* logits, int n_vocab, std::span<const int32_t> history);

 private:
  // The scores the filters see: `logits` itself, or (with a repetition penalty) the
  // sampler's own penalised copy of it in adjusted_.
  const float* Adjusted(const float* logits, int n_vocab, std::span<const int32_t> history);

  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<float> adjusted_;                  // [n_vocab] when a penalty applies
  std::vector<std::pair<float, int32_t>> cand_;  // (score, id), best first
};

}  // namespace pinfer
