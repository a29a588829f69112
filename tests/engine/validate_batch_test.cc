// ValidateBatch, the checks every backend makes before a step: the step's size, the token ids,
// and a KV slot in every block table for every position (none before a sliding window's
// first held block).
#include <numeric>
#include <vector>

#include "engine/backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/kv_cache.h"

namespace pinfer {
namespace {

using ::testing::HasSubstr;

constexpr int kVocab = 100, kBs = 16;

// Two layers, the first with a 20-token window (its own block table), the second full.
std::unique_ptr<KvCache> WindowCache() {
  KvCacheConfig c;
  c.n_layers = 2;
  c.n_kv_heads = 1;
  c.head_dim = 4;
  c.block_size = kBs;
  c.max_model_len = 256;
  c.num_blocks = 32;
  c.layer_windows = {20, 0};
  auto cache = KvCache::Create(c, KvCache::NoStorage());
  EXPECT_TRUE(cache.ok()) << cache.status();
  return *std::move(cache);
}

ForwardBatch Batch(SeqId seq, int from, int n) {
  ForwardBatch b;
  for (int p = from; p < from + n; ++p) b.Add(1, p, seq, p == from + n - 1);
  return b;
}

TEST(ValidateBatch, RefusesOversizedStepsAndTokensOutsideTheVocabulary) {
  auto cache = WindowCache();
  ASSERT_TRUE(cache->AddSequence(1).ok());
  ASSERT_TRUE(cache->Append(1, 8).ok());
  EXPECT_TRUE(ValidateBatch(Batch(1, 0, 8), *cache, kVocab, 8).ok());
  const absl::Status big = ValidateBatch(Batch(1, 0, 8), *cache, kVocab, 7);
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.message(), HasSubstr("a step of 8 tokens exceeds the 7"));
  ForwardBatch bad = Batch(1, 0, 2);
  bad.tokens[1] = kVocab;
  const absl::Status id = ValidateBatch(bad, *cache, kVocab, 8);
  EXPECT_EQ(id.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(id.message(), HasSubstr("token id 100 is outside the vocabulary of 100"));
}

TEST(ValidateBatch, RefusesPositionsWithoutASlot) {
  auto cache = WindowCache();
  ASSERT_TRUE(cache->AddSequence(1).ok());
  ASSERT_TRUE(cache->Append(1, 8).ok());
  const absl::Status past = ValidateBatch(Batch(1, 8, 1), *cache, kVocab, 8);
  EXPECT_EQ(past.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(past.message(), HasSubstr("sequence 1 has no KV slot for position 8"));
  const absl::Status unknown = ValidateBatch(Batch(2, 0, 1), *cache, kVocab, 8);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kFailedPrecondition);
}

// A step whose tokens name one (sequence, position) twice would have two threads write one KV
// row; logit rows outside the step or out of order would read logits that were never made;
// vectors of different lengths would be read past their end.
TEST(ValidateBatch, RefusesASlotNamedTwiceAndBadLogitRows) {
  auto cache = WindowCache();
  ASSERT_TRUE(cache->AddSequence(1).ok());
  ASSERT_TRUE(cache->Append(1, 8).ok());
  ASSERT_TRUE(cache->AddSequence(2).ok());
  ASSERT_TRUE(cache->Append(2, 8).ok());
  ForwardBatch two_seqs = Batch(1, 3, 1);
  two_seqs.Add(1, 3, 2, true);  // the same position of another sequence: allowed
  EXPECT_TRUE(ValidateBatch(two_seqs, *cache, kVocab, 8).ok());
  ForwardBatch twice = Batch(1, 0, 4);
  twice.Add(1, 2, 1, false);
  const absl::Status dup = ValidateBatch(twice, *cache, kVocab, 8);
  EXPECT_EQ(dup.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dup.message(),
              HasSubstr("tokens 2 and 4 of the step both write sequence 1's position 2"));
  ForwardBatch outside = Batch(1, 0, 3);
  outside.logit_rows = {1, 3};
  const absl::Status out = ValidateBatch(outside, *cache, kVocab, 8);
  EXPECT_EQ(out.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.message(), HasSubstr("logit row 3 is not a token of the step (0..2)"));
  ForwardBatch unordered = Batch(1, 0, 3);
  unordered.logit_rows = {2, 1};
  EXPECT_EQ(ValidateBatch(unordered, *cache, kVocab, 8).code(), absl::StatusCode::kInvalidArgument);
  unordered.logit_rows = {0, 0};
  EXPECT_EQ(ValidateBatch(unordered, *cache, kVocab, 8).code(), absl::StatusCode::kInvalidArgument);
}

// 60 tokens computed: the window of position 60 is 41..60, so the window table let go of
// blocks 0 and 1 (positions 0..31) while the full table keeps them. Writing position 31 again
// is refused; 32 (block 2, still held) is not.
TEST(ValidateBatch, RefusesPositionsAWindowTableLetGo) {
  auto cache = WindowCache();
  ASSERT_TRUE(cache->AddSequence(1).ok());
  ASSERT_TRUE(cache->Append(1, 64).ok());
  std::vector<int32_t> tokens(60);
  std::iota(tokens.begin(), tokens.end(), 0);
  cache->MarkComputed(1, tokens);
  ASSERT_EQ(cache->LayerBlockTable(1, 0)[1], kNoBlock);
  ASSERT_NE(cache->LayerBlockTable(1, 1)[1], kNoBlock);
  EXPECT_TRUE(ValidateBatch(Batch(1, 32, 8), *cache, kVocab, 8).ok());
  const absl::Status gone = ValidateBatch(Batch(1, 31, 2), *cache, kVocab, 8);
  EXPECT_EQ(gone.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gone.message(),
              HasSubstr("sequence 1's window-20 block table let go of position 31"));
}

}  // namespace
}  // namespace pinfer
