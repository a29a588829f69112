// Directed tests of KvCache: configuration errors, growth, copy-on-write forks, prefix hits
// and least-recently-used eviction, and the contiguous layout.
#include "kvcache/kv_cache.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace pinfer {
namespace {

KvCacheConfig SmallConfig() {
  KvCacheConfig c;
  c.n_layers = 2;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.dtype = KvDtype::kF16;
  c.block_size = 16;
  c.max_model_len = 128;
  c.max_num_seqs = 4;
  c.num_blocks = 8;
  return c;
}

std::vector<int32_t> Tokens(int n, int32_t start = 1) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

bool Contains(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

TEST(KvCacheErrors, BlockSizeOutOfRange) {
  for (int bs : {7, 300}) {
    KvCacheConfig c = SmallConfig();
    c.block_size = bs;
    const auto r = KvCache::Create(c);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(r.status(), std::to_string(bs))) << r.status();
    EXPECT_TRUE(Contains(r.status(), "8..256")) << r.status();
  }
}

TEST(KvCacheErrors, BlockFormatNeedsRowsOf32) {
  KvCacheConfig c = SmallConfig();
  c.n_kv_heads = 1;
  c.head_dim = 40;
  c.dtype = KvDtype::kQ8_0;
  const auto r = KvCache::Create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "40")) << r.status();
  EXPECT_TRUE(Contains(r.status(), "q8_0")) << r.status();
}

TEST(KvCacheErrors, PoolSmallerThanOneBlock) {
  KvCacheConfig c = SmallConfig();
  c.num_blocks = 0;
  c.pool_bytes = 1000;  // one block: 2 layers x 2 x 16 slots x 64 bytes = 4096
  auto r = KvCache::Create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "4096")) << r.status();
  EXPECT_TRUE(Contains(r.status(), "1000")) << r.status();
  c.layout = KvLayout::kContiguous;  // one 128-token block: 32768 bytes; 1000 B holds 3 tokens
  r = KvCache::Create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "32768")) << r.status();
  EXPECT_TRUE(Contains(r.status(), "longest max_model_len that fits is 3")) << r.status();
  c.pool_bytes = 0;
  EXPECT_FALSE(KvCache::Create(c).ok());
}

TEST(KvCacheErrors, PoolBytesFloorToWholeBlocks) {
  KvCacheConfig c = SmallConfig();
  c.num_blocks = 0;
  c.pool_bytes = 4096 * 5 + 4095;
  auto cache = KvCache::Create(c);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ((*cache)->num_blocks(), 5);
  EXPECT_EQ((*cache)->block_bytes(), 4096u);
}

TEST(KvCacheErrors, MaxModelLenAndMaxNumSeqs) {
  KvCacheConfig c = SmallConfig();
  c.max_model_len = 2048;
  c.num_blocks = 200;
  auto cache = *KvCache::Create(c);
  ASSERT_TRUE(cache->AddSequence(7).ok());
  ASSERT_TRUE(cache->Append(7, 2000).ok());
  const auto before = cache->Report().ToJson();
  const absl::Status s = cache->Append(7, 49);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s, "sequence 7 would grow to 2049 tokens, past max_model_len 2048")) << s;
  EXPECT_EQ(cache->Report().ToJson(), before);
  EXPECT_EQ(cache->AddSequence(7).code(), absl::StatusCode::kAlreadyExists);
  for (SeqId id : {1, 2, 3}) ASSERT_TRUE(cache->AddSequence(id).ok());
  const absl::Status full = cache->AddSequence(9);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(full, "max_num_seqs is 4")) << full;
  EXPECT_EQ(cache->Fork(7, 9).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cache->Append(42, 1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache->Append(7, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->Fork(42, 43).code(), absl::StatusCode::kNotFound);
}

TEST(KvCache, GrowsOneBlockAtATimeAndRunsOutCleanly) {
  KvCacheConfig c = SmallConfig();
  c.max_model_len = 256;
  auto cache = *KvCache::Create(c);
  ASSERT_TRUE(cache->AddSequence(1).ok());
  EXPECT_EQ(cache->BlocksNeeded(1, 1), 1);
  ASSERT_TRUE(cache->Append(1, 1).ok());
  EXPECT_EQ(cache->BlockTable(1).size(), 1u);
  EXPECT_EQ(cache->BlocksNeeded(1, 15), 0);
  EXPECT_EQ(cache->BlocksNeeded(1, 16), 1);
  ASSERT_TRUE(cache->Append(1, 16).ok());
  EXPECT_EQ(cache->BlockTable(1).size(), 2u);
  EXPECT_EQ(cache->num_tokens(1), 17);
  EXPECT_EQ(cache->NumFreeBlocks(), 6);
  const auto before = cache->Report().ToJson();
  const absl::Status s = cache->Append(1, 120);  // needs 7 blocks, 6 free
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(s, "needs 7 more KV block(s)")) << s;
  EXPECT_EQ(cache->Report().ToJson(), before);
  cache->Free(1);
  EXPECT_EQ(cache->NumFreeBlocks(), 8);
  EXPECT_TRUE(cache->CheckInvariants().ok());
}

TEST(KvCache, ForkCopiesSharedPartialBlockOnWrite) {
  auto cache = *KvCache::Create(SmallConfig());
  ASSERT_TRUE(cache->AddSequence(1).ok());
  ASSERT_TRUE(cache->Append(1, 20).ok());
  cache->TokenRow(1, 18, 1, 1)[0] = 0xab;
  ASSERT_TRUE(cache->Fork(1, 2).ok());
  const std::vector<int32_t> parent(cache->BlockTable(1).begin(), cache->BlockTable(1).end());
  EXPECT_EQ(cache->ref_count(parent[0]), 2);
  EXPECT_EQ(cache->ref_count(parent[1]), 2);
  EXPECT_EQ(cache->BlocksNeeded(2, 1), 1);   // copy of the shared partial block
  EXPECT_EQ(cache->BlocksNeeded(1, 12), 1);  // fits in the block, but it must be copied
  EXPECT_EQ(cache->BlocksNeeded(1, 13), 2);
  const int64_t free_before = cache->NumFreeBlocks();
  ASSERT_TRUE(cache->Append(1, 3).ok());
  EXPECT_EQ(cache->NumFreeBlocks(), free_before - 1);
  EXPECT_EQ(cache->BlockTable(1)[0], parent[0]);  // full block still shared
  EXPECT_NE(cache->BlockTable(1)[1], parent[1]);  // partial block copied
  EXPECT_EQ(cache->BlockTable(2)[1], parent[1]);
  EXPECT_EQ(cache->TokenRow(1, 18, 1, 1)[0], 0xab);  // the copy carries the K/V
  EXPECT_EQ(cache->BlocksNeeded(2, 1), 0);           // the child owns the original now
  EXPECT_EQ(cache->Report().tokens_stored, 16 + 7 + 4);
  EXPECT_TRUE(cache->CheckInvariants().ok());
}

TEST(KvCache, PrefixHitsTakeCachedBlocksAndLeaveOneTokenToCompute) {
  auto cache = *KvCache::Create(SmallConfig());
  const std::vector<int32_t> prompt = Tokens(40);
  ASSERT_TRUE(cache->AddSequence(1).ok());
  EXPECT_EQ(cache->MatchPrefix(1, prompt), 0);
  ASSERT_TRUE(cache->Append(1, 40).ok());
  cache->MarkComputed(1, prompt);
  cache->Free(1);
  auto r = cache->Report();
  EXPECT_EQ(r.blocks_cached, 2);
  EXPECT_EQ(r.blocks_free, 6);
  EXPECT_EQ(cache->NumFreeBlocks(), 8);
  ASSERT_TRUE(cache->AddSequence(2).ok());
  EXPECT_EQ(cache->MatchPrefix(2, prompt), 32);
  EXPECT_EQ(cache->num_tokens(2), 32);
  EXPECT_EQ(cache->BlocksNeeded(2, 8), 1);
  ASSERT_TRUE(cache->Append(2, 8).ok());
  // A prompt that is exactly the cached prefix still leaves its last block to compute.
  ASSERT_TRUE(cache->AddSequence(3).ok());
  EXPECT_EQ(cache->MatchPrefix(3, std::span(prompt).first(32)), 16);
  EXPECT_EQ(cache->ref_count(cache->BlockTable(2)[0]), 2);
  // A different first block matches nothing.
  std::vector<int32_t> other = prompt;
  other[0] = 999;
  ASSERT_TRUE(cache->AddSequence(4).ok());
  EXPECT_EQ(cache->MatchPrefix(4, other), 0);
  EXPECT_TRUE(cache->CheckInvariants().ok());
}

TEST(KvCache, EvictsLeastRecentlyUsedIdleBlocksTailFirst) {
  KvCacheConfig c = SmallConfig();
  c.num_blocks = 4;
  auto cache = *KvCache::Create(c);
  const std::vector<int32_t> a = Tokens(33, 1), b = Tokens(33, 500);
  for (auto [id, p] : {std::pair<SeqId, const std::vector<int32_t>*>{1, &a}, {2, &b}}) {
    ASSERT_TRUE(cache->AddSequence(id).ok());
    ASSERT_TRUE(cache->Append(id, 32).ok());
    cache->MarkComputed(id, std::span(*p).first(32));
    cache->Free(id);
  }
  EXPECT_EQ(cache->Report().blocks_cached, 4);
  EXPECT_EQ(cache->NumFreeBlocks(), 4);
  ASSERT_TRUE(cache->AddSequence(3).ok());
  ASSERT_TRUE(cache->Append(3, 1).ok());  // evicts a's second block
  ASSERT_TRUE(cache->AddSequence(4).ok());
  EXPECT_EQ(cache->MatchPrefix(4, a), 16);  // a's first block survived
  ASSERT_TRUE(cache->AddSequence(5).ok());
  EXPECT_EQ(cache->MatchPrefix(5, b), 32);  // b untouched
  EXPECT_EQ(cache->NumFreeBlocks(), 0);
  EXPECT_EQ(cache->Append(3, 16).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(cache->CheckInvariants().ok());
}

TEST(KvCache, PrefixCachingOff) {
  KvCacheConfig c = SmallConfig();
  c.prefix_caching = false;
  auto cache = *KvCache::Create(c);
  ASSERT_TRUE(cache->AddSequence(1).ok());
  ASSERT_TRUE(cache->Append(1, 40).ok());
  cache->MarkComputed(1, Tokens(40));
  cache->Free(1);
  EXPECT_EQ(cache->Report().blocks_cached, 0);
  EXPECT_EQ(cache->Report().blocks_free, 8);
  ASSERT_TRUE(cache->AddSequence(2).ok());
  EXPECT_EQ(cache->MatchPrefix(2, Tokens(40)), 0);
}

TEST(KvCache, ContiguousReservesMaxModelLenAtFirstAppend) {
  KvCacheConfig c = SmallConfig();
  c.layout = KvLayout::kContiguous;
  c.num_blocks = 2;
  auto cache = *KvCache::Create(c);
  EXPECT_EQ(cache->block_size(), 128);
  EXPECT_FALSE(cache->config().prefix_caching);
  ASSERT_TRUE(cache->AddSequence(1).ok());
  EXPECT_EQ(cache->BlocksNeeded(1, 5), 1);
  ASSERT_TRUE(cache->Append(1, 5).ok());
  EXPECT_EQ(cache->BlocksNeeded(1, 123), 0);
  ASSERT_TRUE(cache->Fork(1, 2).ok());
  EXPECT_EQ(cache->BlocksNeeded(2, 1), 1);  // copy-on-write of the whole sequence block
  ASSERT_TRUE(cache->Append(2, 1).ok());
  ASSERT_TRUE(cache->AddSequence(3).ok());
  EXPECT_EQ(cache->Append(3, 1).code(), absl::StatusCode::kResourceExhausted);
  const OccupancyReport r = cache->Report();
  EXPECT_EQ(r.slots_allocated, 256);
  EXPECT_EQ(r.tokens_stored, 11);
  EXPECT_EQ(r.fragmentation, 245);
  EXPECT_TRUE(cache->CheckInvariants().ok());
}

TEST(KvCache, LayoutNames) {
  EXPECT_EQ(*ParseKvLayout("paged"), KvLayout::kPaged);
  EXPECT_EQ(*ParseKvLayout("contiguous"), KvLayout::kContiguous);
  EXPECT_FALSE(ParseKvLayout("ring").ok());
  EXPECT_EQ(KvLayoutName(KvLayout::kContiguous), "contiguous");
}

}  // namespace
}  // namespace pinfer
