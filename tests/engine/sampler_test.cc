// The sampler reads a logits row without changing it, so forks of one sequence can sample
// from the same row; greedy picks the highest score (ties to the lower id); the repetition
// penalty acts on the sampler's own copy; a token mask confines every path to its tokens.
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
  const SamplingParams p = [] {
    SamplingParams q;
    q.temperature = 1.0f;
    q.top_k = 0;
    q.top_p = 1.0f;
    q.min_p = 0;
    q.repetition_penalty = 1.3f;
    q.seed = 42;
    return q;
  }();
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

TEST(Sampler, AMaskConfinesGreedyAndEveryDrawToItsTokens) {
  std::vector<float> row(130);
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>(i % 7);
  const std::vector<float> before = row;
  std::vector<uint64_t> mask(3, 0);  // tokens 1, 65 and 129 (across three words)
  for (int32_t id : {1, 65, 129}) mask[id >> 6] |= uint64_t{1} << (id & 63);
  // Greedy: 129 % 7 = 3 beats 65 % 7 = 2 and 1 % 7 = 1, while 6 (6.0) is masked.
  EXPECT_EQ(Sampler(Greedy()).Sample(row.data(), 130, {}, mask), 129);
  SamplingParams p;
  p.temperature = 1.5f, p.top_k = 100, p.top_p = 0.99f, p.min_p = 0.0f, p.seed = 3;
  p.logit_bias = {{6, 100.0f}};  // a masked token, pushed hard: still never chosen
  p.presence_penalty = 1.0f;
  Sampler s(p);
  std::vector<int> seen(130, 0);
  for (int i = 0; i < 300; ++i) ++seen[s.Sample(row.data(), 130, {}, mask)];
  EXPECT_EQ(seen[1] + seen[65] + seen[129], 300);
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[65], 0);
  EXPECT_EQ(row, before);
}

}  // namespace
}  // namespace pinfer
