#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/grammar/token_mask.h"
#include "engine/param_error.h"

namespace pinfer {
namespace {

absl::Status Bad(const char* name, double v, const char* range) {
  return InvalidParamError(name, absl::StrCat(name, " = ", v, " is out of range (", range, ")"));
}

}  // namespace

absl::Status SamplingParams::Validate(int n_vocab) const {
  if (!(temperature >= 0) || temperature > 100) return Bad("temperature", temperature, "0..100");
  if (!(top_p > 0) || top_p > 1) return Bad("top_p", top_p, "greater than 0, at most 1");
  if (!(min_p >= 0) || min_p > 1) return Bad("min_p", min_p, "0..1");
  if (!(repetition_penalty > 0) || repetition_penalty > 10) {
    return Bad("repetition_penalty", repetition_penalty, "greater than 0, at most 10");
  }
  if (!(presence_penalty >= -2) || presence_penalty > 2) {
    return Bad("presence_penalty", presence_penalty, "-2..2");
  }
  if (!(frequency_penalty >= -2) || frequency_penalty > 2) {
    return Bad("frequency_penalty", frequency_penalty, "-2..2");
  }
  if (max_tokens < 0) return Bad("max_tokens", max_tokens, "0 or more");
  if (repeat_last_n < -1) return Bad("repeat_last_n", repeat_last_n, "-1 (all), 0 (off) or more");
  if (logprobs < -1 || (n_vocab > 0 && logprobs > n_vocab)) {
    return Bad("logprobs", logprobs, "-1 (none) up to the vocabulary's size");
  }
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || (n_vocab > 0 && id >= n_vocab)) {
      return InvalidParamError(
          "logit_bias", absl::StrCat("logit_bias names token ", id, ", outside the vocabulary (0..",
                                     n_vocab - 1, ")"));
    }
    if (!(bias >= -100) || bias > 100) return Bad("logit_bias", bias, "-100..100");
  }
  return absl::OkStatus();
}

Sampler::Sampler(const SamplingParams& params, int prompt_len)
    : p_(params), prompt_len_(prompt_len), rng_(params.seed.value_or(std::random_device{}())) {}

void Sampler::ApplyLogitBias() {
  for (const auto& [id, bias] : p_.logit_bias) scores_[static_cast<size_t>(id)] += bias;
}

void Sampler::ApplyRepetitionPenalty(std::span<const int32_t> history) {
  const size_t n =
      p_.repeat_last_n < 0 ? history.size() : std::min(history.size(), (size_t)p_.repeat_last_n);
  std::vector<int32_t> seen(history.end() - (ptrdiff_t)n, history.end());
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (int32_t t : seen) {
    if (t < 0 || t >= (int32_t)scores_.size()) continue;
    float& l = scores_[static_cast<size_t>(t)];
    l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
  }
}

void Sampler::ApplyPresenceFrequency(std::span<const int32_t> output) {
  std::vector<int32_t> sorted(output.begin(), output.end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    const int32_t t = sorted[i];
    if (t >= 0 && t < (int32_t)scores_.size()) {
      scores_[static_cast<size_t>(t)] -=
          p_.frequency_penalty * static_cast<float>(j - i) + p_.presence_penalty;
    }
    i = j;
  }
}

const float* Sampler::Adjusted(const float* logits, int n_vocab, std::span<const int32_t> history,
                               std::span<const uint64_t> allowed) {
  const bool repetition = p_.repetition_penalty != 1.0f && p_.repeat_last_n != 0;
  const bool openai = p_.presence_penalty != 0 || p_.frequency_penalty != 0;
  if (p_.logit_bias.empty() && !repetition && !openai && allowed.empty()) return logits;
  scores_.assign(logits, logits + n_vocab);
  ApplyLogitBias();
  if (repetition) ApplyRepetitionPenalty(history);
  if (openai) {
    const size_t from = std::min(history.size(), static_cast<size_t>(std::max(prompt_len_, 0)));
    ApplyPresenceFrequency(history.subspan(from));
  }
  if (!allowed.empty()) grammar::ApplyTokenMask(allowed, scores_.data(), n_vocab);
  return scores_.data();
}

void Sampler::TopK(const float* scores, int n_vocab, std::span<const uint64_t> allowed) {
  cand_.clear();
  if (allowed.empty()) {
    for (int32_t i = 0; i < n_vocab; ++i) cand_.push_back({scores[i], i});
  } else {  // masked tokens never become candidates (no draw can land on one)
    for (int32_t i = 0; i < n_vocab; ++i) {
      if (grammar::MaskAllows(allowed, i)) cand_.push_back({scores[i], i});
    }
  }
  auto by_score = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (p_.top_k > 0 && (size_t)p_.top_k < cand_.size()) {
    std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), by_score);
    cand_.resize(static_cast<size_t>(p_.top_k));
  } else {
    std::sort(cand_.begin(), cand_.end(), by_score);
  }
}

// prob: the candidates' probabilities at temperature 1, unnormalised (best first).
void Sampler::TopP(const std::vector<double>& prob) {
  if (p_.top_p >= 1.0f) return;
  double sum = 0, acc = 0;
  for (size_t i = 0; i < cand_.size(); ++i) sum += prob[i];
  for (size_t i = 0; i < cand_.size(); ++i) {
    acc += prob[i] / sum;
    if (acc >= p_.top_p) {
      cand_.resize(i + 1);
      return;
    }
  }
}

void Sampler::MinP(const std::vector<double>& prob) {
  if (p_.min_p <= 0) return;
  size_t n = 1;
  while (n < cand_.size() && prob[n] >= p_.min_p * prob[0]) ++n;
  cand_.resize(n);
}

int32_t Sampler::Draw() {
  std::vector<double> weight(cand_.size());
  double total = 0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    total += weight[i] = std::exp((cand_[i].first - cand_[0].first) / p_.temperature);
  }
  double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (size_t i = 0; i < cand_.size(); ++i) {
    if ((u -= weight[i]) <= 0) return cand_[i].second;
  }
  return cand_.back().second;
}

int32_t Sampler::Sample(const float* raw, int n_vocab, std::span<const int32_t> history,
                        std::span<const uint64_t> allowed) {
  const float* scores = Adjusted(raw, n_vocab, history, allowed);
  if (p_.temperature <= 0) {
    return static_cast<int32_t>(std::max_element(scores, scores + n_vocab) - scores);
  }
  TopK(scores, n_vocab, allowed);
  std::vector<double> prob(cand_.size());
  for (size_t i = 0; i < cand_.size(); ++i) prob[i] = std::exp(cand_[i].first - cand_[0].first);
  TopP(prob);
  MinP(prob);
  return Draw();
}

}  // namespace pinfer
