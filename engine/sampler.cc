#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace pinfer {

absl::Status SamplingParams::Validate() const {
  auto bad = [](const char* name, double v, const char* range) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " = ", v, " is out of range (", range, ")"));
  };
  if (!(temperature >= 0) || temperature > 100) return bad("temperature", temperature, "0..100");
  if (!(top_p > 0) || top_p > 1) return bad("top_p", top_p, "greater than 0, at most 1");
  if (!(min_p >= 0) || min_p > 1) return bad("min_p", min_p, "0..1");
  if (!(repetition_penalty > 0) || repetition_penalty > 10) {
    return bad("repetition_penalty", repetition_penalty, "greater than 0, at most 10");
  }
  if (max_tokens < 0) return bad("max_tokens", max_tokens, "0 or more");
  if (repeat_last_n < 0) return bad("repeat_last_n", repeat_last_n, "0 or more");
  return absl::OkStatus();
}

Sampler::Sampler(const SamplingParams& params) : p_(params), rng_(params.seed) {}

const float* Sampler::Adjusted(const float* logits, int n_vocab, std::span<const int32_t> history) {
  if (p_.repetition_penalty == 1.0f) return logits;
  adjusted_.assign(logits, logits + n_vocab);
  const size_t from =
      history.size() > (size_t)p_.repeat_last_n ? history.size() - (size_t)p_.repeat_last_n : 0;
  std::vector<int32_t> seen(history.begin() + (ptrdiff_t)from, history.end());
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (int32_t t : seen) {
    if (t < 0 || t >= n_vocab) continue;
    float& l = adjusted_[static_cast<size_t>(t)];
    l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
  }
  return adjusted_.data();
}

int32_t Sampler::Sample(const float* raw, int n_vocab, std::span<const int32_t> history) {
  const float* logits = Adjusted(raw, n_vocab, history);
  if (p_.temperature <= 0) {
    return static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits);
  }
  cand_.clear();
  for (int32_t i = 0; i < n_vocab; ++i) cand_.push_back({logits[i], i});
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = cand_.size();
  if (p_.top_k > 0 && (size_t)p_.top_k < keep) {
    keep = (size_t)p_.top_k;
    std::partial_sort(cand_.begin(), cand_.begin() + (ptrdiff_t)keep, cand_.end(), by_logit);
    cand_.resize(keep);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  // Probabilities at temperature 1 for the top-p / min-p filters.
  std::vector<double> prob(cand_.size());
  double sum = 0;
  for (size_t i = 0; i < cand_.size(); ++i)
    sum += prob[i] = std::exp(cand_[i].first - cand_[0].first);
  if (p_.top_p < 1.0f) {
    double acc = 0;
    for (size_t i = 0; i < cand_.size(); ++i) {
      acc += prob[i] / sum;
      if (acc >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
    cand_.resize(std::min(keep, cand_.size()));
  }
  if (p_.min_p > 0) {
    size_t n = 1;
    while (n < cand_.size() && prob[n] >= p_.min_p * prob[0]) ++n;
    cand_.resize(n);
  }
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

}  // namespace pinfer
