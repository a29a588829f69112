// Chooses the next token from a row of raw logits, as a sequence of small named steps (in
// this order, as vLLM and llama.cpp apply them): logit bias, repetition penalty, presence
// and frequency penalties, a grammar's token mask (engine/grammar: every token it does not
// allow is out), then greedy argmax, or top-k, top-p and min-p filtering and a draw at the
// temperature. The row is never modified: the steps that change scores work on the
// sampler's own copy.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace pinfer {

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy (the highest score; ties to the lower id)
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // 1: off
  float min_p = 0.05f;       // 0: off; keeps tokens with p >= min_p * p_max
  // Repetition penalty (Hugging Face's and vLLM's repetition_penalty, llama.cpp's
  // repeat_penalty): the logit of each distinct token among the last repeat_last_n tokens of
  // prompt + output is divided by it when positive and multiplied by it otherwise. 1: off.
  float repetition_penalty = 1.0f;
  int repeat_last_n = 64;  // the penalty's window; -1: the whole sequence (vLLM); 0: off
  // OpenAI's penalties over the tokens generated so far (the prompt excluded), c = count:
  //   logit -= frequency_penalty * c + presence_penalty * (c > 0)
  float presence_penalty = 0.0f;   // -2..2; 0: off
  float frequency_penalty = 0.0f;  // -2..2; 0: off
  // Added to a token's logit before any penalty (OpenAI's logit_bias, -100..100: -100 bans
  // the token, +100 all but forces it). One entry per id.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Log-probabilities reported per generated token (engine/logprobs.h): -1 none, 0 the
  // chosen token's, k > 0 also the k most likely (top_logprobs).
  int logprobs = -1;
  // The draw's seed; nullopt: the engine picks a random one per request (a given seed
  // reproduces the same tokens).
  std::optional<uint64_t> seed;
  int max_tokens = 128;           // tokens to generate
  std::vector<std::string> stop;  // stop strings (checked on the decoded text)
  bool ignore_eos = false;

  // InvalidArgument naming the parameter when a value is out of range; n_vocab > 0 also
  // checks logit_bias and logprobs against the vocabulary.
  absl::Status Validate(int n_vocab = 0) const;
};

class Sampler {
 public:
  // prompt_len: the leading tokens of every history that are the prompt (the presence and
  // frequency penalties count only what follows).
  explicit Sampler(const SamplingParams& params, int prompt_len = 0);
  // logits: [n_vocab] raw scores, read only (the caller's row stays as the model wrote it, so
  // forks of one sequence sample from the same row). history: tokens so far (prompt and
  // output). allowed: empty, or a token mask of (n_vocab + 63) / 64 words (bit id % 64 of
  // word id / 64 set: token id may be chosen), which must allow at least one token; every
  // path (greedy, top-k/p, min-p, the draw) then chooses among the allowed tokens only.
  // Returns a token id in [0, n_vocab).
  int32_t Sample(const float* logits, int n_vocab, std::span<const int32_t> history,
                 std::span<const uint64_t> allowed = {});

 private:
  // The scores the choice sees: `logits` itself when no step changes them, else scores_
  // after the logit bias, the penalties and the mask (-inf for every token it does not allow).
  const float* Adjusted(const float* logits, int n_vocab, std::span<const int32_t> history,
                        std::span<const uint64_t> allowed);
  void ApplyLogitBias();
  void ApplyRepetitionPenalty(std::span<const int32_t> history);
  void ApplyPresenceFrequency(std::span<const int32_t> output);
  // The random choice: candidates best first (the allowed ones only, when masked), cut by
  // top-k, top-p, min-p, then drawn.
  void TopK(const float* scores, int n_vocab, std::span<const uint64_t> allowed);
  void TopP(const std::vector<double>& prob);
  void MinP(const std::vector<double>& prob);
  int32_t Draw();

  SamplingParams p_;
  int prompt_len_;
  std::mt19937_64 rng_;
  std::vector<float> scores_;                    // [n_vocab] when a step changes scores
  std::vector<std::pair<float, int32_t>> cand_;  // (score, id), best first
};

}  // namespace pinfer
