// Occupancy reports equal the formula: bytes_per_token = 2 x layers x row bytes of the format.
#include "kvcache/occupancy.h"

#include "gtest/gtest.h"
#include "kvcache/kv_cache.h"
#include "nlohmann/json.hpp"

namespace pinfer {
namespace {

uint64_t BytesPerToken(int layers, int kv_heads, int head_dim, KvDtype d) {
  KvCacheConfig c;
  c.n_layers = layers;
  c.n_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.dtype = d;
  c.num_blocks = 4;
  auto cache = KvCache::Create(c, KvCache::NoStorage());
  EXPECT_TRUE(cache.ok()) << cache.status();
  if (!cache.ok()) return 0;
  EXPECT_EQ((*cache)->Report().bytes_per_token, (*cache)->bytes_per_token());
  EXPECT_EQ((*cache)->Report().bytes_reserved, 4 * (*cache)->block_bytes());
  return (*cache)->bytes_per_token();
}

TEST(Occupancy, BytesPerTokenMatchesTheLedgerFormula) {
  // stories260K: 5 layers, 4 kv heads, head_dim 8 (row of 32 values).
  EXPECT_EQ(BytesPerToken(5, 4, 8, KvDtype::kF16), 640u);
  EXPECT_EQ(BytesPerToken(5, 4, 8, KvDtype::kF32), 1280u);
  EXPECT_EQ(BytesPerToken(5, 4, 8, KvDtype::kQ8_0), 340u);
  EXPECT_EQ(BytesPerToken(5, 4, 8, KvDtype::kQ4_0), 180u);
  EXPECT_EQ(BytesPerToken(5, 4, 8, KvDtype::kFp8E4M3), 2u * 5 * (32 + 4));
  // Llama-2-7B: 32 layers, 32 kv heads, head_dim 128.
  EXPECT_EQ(BytesPerToken(32, 32, 128, KvDtype::kF16), 524288u);
  EXPECT_EQ(BytesPerToken(32, 32, 128, KvDtype::kQ8_0), 278528u);
  // Mistral-7B: 8 kv heads.
  EXPECT_EQ(BytesPerToken(32, 8, 128, KvDtype::kF16), 131072u);
}

TEST(Occupancy, ReportCountsSharedBlocksOnce) {
  KvCacheConfig c;
  c.n_layers = 5;
  c.n_kv_heads = 4;
  c.head_dim = 8;
  c.dtype = KvDtype::kF16;
  c.block_size = 16;
  c.num_blocks = 10;
  auto cache = *KvCache::Create(c);
  ASSERT_TRUE(cache->AddSequence(1).ok());
  ASSERT_TRUE(cache->Append(1, 40).ok());  // 3 blocks, 40 tokens
  ASSERT_TRUE(cache->Fork(1, 2).ok());     // shares all 3
  ASSERT_TRUE(cache->Append(2, 1).ok());   // copies the partial block
  const OccupancyReport r = cache->Report();
  EXPECT_EQ(r.blocks_total, 10);
  EXPECT_EQ(r.blocks_used, 4);
  EXPECT_EQ(r.blocks_free, 6);
  EXPECT_EQ(r.tokens_stored, 32 + 8 + 9);
  EXPECT_EQ(r.slots_allocated, 64);
  EXPECT_EQ(r.fragmentation, 64 - 49);
  EXPECT_EQ(r.bytes_used, 49u * 640);
  EXPECT_EQ(r.bytes_reserved, 10u * 16 * 640);
  ASSERT_EQ(r.seqs.size(), 2u);
  EXPECT_EQ(r.seqs[1].id, 2);
  EXPECT_EQ(r.seqs[1].tokens, 41);
  EXPECT_EQ(r.seqs[1].slots, 48);
  EXPECT_EQ(r.seqs[1].fragmentation, 7);
  EXPECT_DOUBLE_EQ(r.utilization(), 49.0 / 160.0);

  const nlohmann::json j = nlohmann::json::parse(r.ToJson());
  for (const char* key :
       {"dtype", "layout", "block_size", "bytes_per_token", "blocks_total", "blocks_used",
        "blocks_free", "blocks_cached", "tokens_stored", "slots_allocated", "fragmentation",
        "bytes_reserved", "bytes_used", "utilization", "seqs"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["tokens_stored"], 49);
  EXPECT_EQ(j["dtype"], "f16");
  EXPECT_EQ(j["layout"], "paged");
  EXPECT_EQ(j["seqs"][0]["tokens"], 40);
  const std::string text = r.ToText();
  EXPECT_NE(text.find("f16, paged, 16 tokens/block, 640 bytes/token"), std::string::npos) << text;
  EXPECT_NE(text.find("49 stored in 64 slots"), std::string::npos) << text;
}

}  // namespace
}  // namespace pinfer
