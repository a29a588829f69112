#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>

namespace pinfer {

SampledLogprobs ComputeLogprobs(const float* logits, int n_vocab, int32_t chosen, int top_k) {
  const float mx = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  auto lp = [&](int32_t id) { return static_cast<float>(logits[id] - lse); };
  SampledLogprobs out;
  out.chosen = {chosen, lp(chosen)};
  top_k = std::clamp(top_k, 0, n_vocab);
  if (top_k == 0) return out;
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  for (int i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = i;
  std::partial_sort(ids.begin(), ids.begin() + top_k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  out.top.reserve(static_cast<size_t>(top_k));
  for (int i = 0; i < top_k; ++i) out.top.push_back({ids[static_cast<size_t>(i)], lp(ids[i])});
  return out;
}

}  // namespace pinfer
