// The sampler reads a logits row without changing it, so forks of one sequence can sample
// from the same row; greedy picks the highest score (ties to the lower id); the repetition
// penalty acts on the sampler's own copy.
#include "engine/sampler.h"

#include <vector>

#include "gtest/gtest.h"

namespace pinfer {
namespace {

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

TEST(Sampler, GreedyTakesTheHighestScoreAndTiesGoToTheLowerId) {
  Sampler s(Greedy());
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.Sample(row.data(), 4, {}), 1);
}

TEST(Sampler, RepetitionPenaltyChangesThePickButNotTheRow) {
  SamplingParams p = Greedy();
  p.repetition_penalty = 4.0f;
  Sampler s(p);
  const std::vector<float> row = {1.0f, 3.0f, 2.0f, -1.0f};
  const std::vector<float> before = row;
  const std::vector<int32_t> history = {1};  // 3.0 / 4 = 0.75 now loses to 2.0
  EXPECT_EQ(s.Sample(row.data(), 4, history), 2);
  EXPECT_EQ(row, before);
  // Without the token in its history the same row gives the plain argmax.
  EXPECT_EQ(Sampler(p).Sample(row.data(), 4, {}), 1);
}

TEST(Sampler, SameSeedSameRowSameTokensAndTheRowIsUntouched) {
  // Every filter off but the penalty, so all 64 ids stay candidates.
  const SamplingParams p{.temperature = 1.0f,
                         .top_k = 0,
                         .top_p = 1.0f,
                         .min_p = 0,
                         .repetition_penalty = 1.3f,
                         .seed = 42,
                         .stop = {}};
  std::vector<float> row(64);
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>((i * 37) % 11) * 0.25f;
  const std::vector<float> before = row;
  Sampler a(p), b(p);
  std::vector<int32_t> history = {3, 5};
  std::vector<int32_t> got_a, got_b;
  for (int i = 0; i < 20; ++i) {
    got_a.push_back(a.Sample(row.data(), 64, history));
    got_b.push_back(b.Sample(row.data(), 64, history));
    history.push_back(got_a.back());
  }
  EXPECT_EQ(got_a, got_b);
  EXPECT_EQ(row, before);
  for (int32_t t : got_a) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 64);
  }
}

}  // namespace
}  // namespace pinfer
