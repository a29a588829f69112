// Directed tests of sliding windows in the KV cache: a window table lets its blocks go as a
// sequence decodes (to the prefix cache when they are cached entries, else the free list),
// BlocksToGrow predicts a decode's peak, and a prefix hit takes only the blocks of the window
// it needs, backing off to a shorter match when some of them were evicted.
#include <algorithm>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "kvcache/kv_cache.h"
#include "kvcache/kv_codec.h"

namespace pinfer {
namespace {

constexpr int kBs = 16, kWindow = 32;

// Two layers: layer 0 with a 32-token window, layer 1 full attention; one f32 value a row.
KvCacheConfig WindowConfig(int64_t num_blocks, bool prefix) {
  KvCacheConfig c;
  c.n_layers = 2;
  c.n_kv_heads = 1;
  c.head_dim = 1;
  c.dtype = KvDtype::kF32;
  c.block_size = kBs;
  c.max_model_len = 512;
  c.max_num_seqs = 8;
  c.num_blocks = num_blocks;
  c.prefix_caching = prefix;
  c.layer_windows = {kWindow, 0};
  return c;
}

std::vector<int32_t> Tokens(int n, int32_t start) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

// Appends n tokens of `tokens` to the sequence, writes their rows (value: layer * 1000 + pos)
// and marks them computed, as an engine step does.
void Step(KvCache& cache, SeqId id, const std::vector<int32_t>& tokens, int n) {
  const int from = cache.num_tokens(id);
  ASSERT_TRUE(cache.Append(id, n).ok());
  for (int pos = from; pos < from + n; ++pos) {
    for (int layer = 0; layer < 2; ++layer) {
      const float v = static_cast<float>(layer * 1000 + pos);
      for (int kv = 0; kv < 2; ++kv)
        KvEncodeRow(KvDtype::kF32, &v, cache.TokenRow(id, pos, layer, kv), 1);
    }
  }
  cache.MarkComputed(id, std::span<const int32_t>(tokens).first(static_cast<size_t>(from + n)));
}

float RowValue(const KvCache& cache, SeqId id, int pos, int layer) {
  float v = -1;
  KvDecodeRange(KvDtype::kF32, cache.TokenRow(id, pos, layer, 0), 1, 0, 1, &v);
  return v;
}

TEST(KvCacheWindow, DecodingLetsWindowBlocksGoToThePrefixCacheOrTheFreeList) {
  for (bool prefix : {true, false}) {
    SCOPED_TRACE(prefix ? "prefix caching" : "no prefix caching");
    auto cache = *KvCache::Create(WindowConfig(64, prefix));
    ASSERT_EQ(cache->num_tables(), 2);  // table 0: the full layer; table 1: the window layer
    EXPECT_EQ(cache->block_bytes(), 2u * kBs * 4);  // one layer a block, K and V
    const std::vector<int32_t> tokens = Tokens(200, 1);
    ASSERT_TRUE(cache->AddSequence(1).ok());
    Step(*cache, 1, tokens, 20);
    for (int n = 21; n <= 200; ++n) {
      Step(*cache, 1, tokens, 1);
      const int64_t all = (n + kBs - 1) / kBs;
      const int64_t first = std::max(0, n - kWindow + 1) / kBs;
      const OccupancyReport r = cache->Report();
      ASSERT_EQ(r.groups.size(), 2u);
      ASSERT_EQ(r.groups[0].blocks_used, all) << n;
      ASSERT_EQ(r.groups[1].blocks_used, all - first) << n;
      ASSERT_LE(r.groups[1].blocks_used, 3) << n;  // WindowBlocksBound(32, 16, 1)
      ASSERT_EQ(r.blocks_used, cache->layer_groups().BlocksHeld(n, kBs));
      ASSERT_EQ(r.blocks_cached, prefix ? first : 0) << n;
      ASSERT_EQ(cache->LayerBlockTable(
                    1, 0)[static_cast<size_t>(std::max<int64_t>(first, 1) - 1)] == kNoBlock,
                first > 0);
      ASSERT_TRUE(cache->CheckInvariants().ok()) << cache->CheckInvariants();
    }
    // 200 tokens: 13 full blocks, the window's 3 (positions 169..199 read by the next query).
    EXPECT_EQ(cache->Report().blocks_used, 13 + 3);
    EXPECT_EQ(cache->TokenRow(1, 159, 0, 0), nullptr);  // gone from the window layer
    EXPECT_EQ(RowValue(*cache, 1, 160, 0), 160.0f);
    EXPECT_EQ(RowValue(*cache, 1, 0, 1), 1000.0f);  // the full layer keeps everything
    cache->Free(1);
    EXPECT_EQ(cache->NumFreeBlocks(), 64);
  }
}

TEST(KvCacheWindow, BlocksToGrowIsTheDecodePeak) {
  const std::vector<int32_t> tokens = Tokens(200, 1);
  for (int start : {1, 20, 31, 32, 47, 48, 63, 100}) {
    for (int k : {1, 2, 15, 16, 17, 40}) {
      auto cache = *KvCache::Create(WindowConfig(64, false));
      ASSERT_TRUE(cache->AddSequence(1).ok());
      Step(*cache, 1, tokens, start);
      const int64_t predicted = cache->BlocksToGrow(1, k);
      const int64_t before = cache->Report().blocks_used;
      int64_t peak = 0;
      for (int i = 0; i < k; ++i) {
        ASSERT_TRUE(cache->Append(1, 1).ok());
        peak = std::max(peak, cache->Report().blocks_used - before);
        cache->MarkComputed(
            1, std::span<const int32_t>(tokens).first(static_cast<size_t>(cache->num_tokens(1))));
      }
      EXPECT_EQ(predicted, peak) << "from " << start << " growing " << k;
    }
  }
}

TEST(KvCacheWindow, PrefixHitTakesOnlyTheWindowsBlocksAndBacksOffPastEvictedOnes) {
  // 19 blocks: sequence 1 at 140 tokens holds 9 full-table blocks and the window's 3 (6..8);
  // the window's blocks 0..5 are idle cache entries, one block is free.
  auto cache = *KvCache::Create(WindowConfig(19, true));
  const std::vector<int32_t> tokens = Tokens(140, 1);
  ASSERT_TRUE(cache->AddSequence(1).ok());
  Step(*cache, 1, tokens, 100);
  for (int n = 100; n < 140; ++n) Step(*cache, 1, tokens, 1);
  OccupancyReport r = cache->Report();
  ASSERT_EQ(r.blocks_used, 12);
  ASSERT_EQ(r.blocks_cached, 6);
  ASSERT_EQ(r.blocks_free, 1);

  // A 51-token prompt matches 3 blocks: the full table's 0..2 (shared with sequence 1) and
  // the window's 1 and 2 (the window of position 48 is 17..48), which become the most
  // recently used idle entries again when it is freed.
  ASSERT_TRUE(cache->AddSequence(2).ok());
  ASSERT_EQ(cache->MatchPrefix(2, std::span<const int32_t>(tokens).first(51)), 48);
  const auto window2 = cache->LayerBlockTable(2, 0);
  ASSERT_EQ(window2.size(), 3u);
  EXPECT_EQ(window2[0], kNoBlock);
  EXPECT_EQ(cache->LayerBlockTable(2, 1)[0], cache->LayerBlockTable(1, 1)[0]);
  EXPECT_EQ(cache->ref_count(cache->LayerBlockTable(1, 1)[0]), 2);
  EXPECT_EQ(RowValue(*cache, 2, 16, 0), 16.0f);
  EXPECT_EQ(RowValue(*cache, 2, 47, 0), 47.0f);
  EXPECT_EQ(cache->TokenRow(2, 15, 0, 0), nullptr);
  cache->Free(2);

  // Another sequence takes the free block and evicts the three least recently used idle
  // entries: the window's blocks 0, 3 and 4.
  ASSERT_TRUE(cache->AddSequence(4).ok());
  ASSERT_TRUE(cache->Append(4, 32).ok());
  r = cache->Report();
  ASSERT_EQ(r.blocks_cached, 3);
  ASSERT_EQ(r.blocks_free, 0);

  // The first 100 tokens again: the full table has blocks 0..5, but the window of position 96
  // needs the window's 4 (evicted), of 64 its 3 (evicted); the window of 48 (blocks 1, 2) is
  // whole, so the match is 48 tokens.
  ASSERT_TRUE(cache->AddSequence(3).ok());
  ASSERT_EQ(cache->MatchPrefix(3, std::span<const int32_t>(tokens).first(101)), 48);
  EXPECT_EQ(cache->LayerBlockTable(3, 0)[0], kNoBlock);
  for (int pos : {16, 40, 47}) EXPECT_EQ(RowValue(*cache, 3, pos, 0), static_cast<float>(pos));
  for (int pos : {0, 47}) EXPECT_EQ(RowValue(*cache, 3, pos, 1), 1000.0f + pos);
  EXPECT_TRUE(cache->CheckInvariants().ok()) << cache->CheckInvariants();
}

}  // namespace
}  // namespace pinfer
