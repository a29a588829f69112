// AttendOne, through every kernel set this CPU runs, against a float64 reference over the
// decoded cache: every KV format, grouped-query shapes, sliding windows and soft-capping,
// contexts up to 4096 and block sizes; paged vs contiguous bit-identity; splitting kv heads.
#include "kvcache/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kvcache/attention_kernels.h"
#include "kvcache/kv_codec.h"

namespace pinfer {
namespace {

using attention::AttentionKernels;

constexpr int kLayers = 2, kLayer = 1;

struct Filled {
  std::unique_ptr<KvCache> cache;
  AttentionShape shape;
};

// A cache holding n_ctx tokens of seeded random K/V in sequence 1 (same values for any
// layout or block size): values N(0,1), keys N(0,4). With per-layer windows, the sequence's
// first n_ctx - 1 tokens are marked computed, so the window tables let go of the blocks the
// query at position n_ctx - 1 does not read.
Filled MakeCache(KvDtype d, KvLayout layout, int block_size, int n_heads, int n_kv, int hd,
                 int n_ctx, uint32_t seed, std::vector<int> windows = {}) {
  KvCacheConfig c;
  c.layer_windows = std::move(windows);
  c.n_layers = kLayers;
  c.n_kv_heads = n_kv;
  c.head_dim = hd;
  c.dtype = d;
  c.layout = layout;
  c.block_size = block_size;
  c.max_model_len = std::max(n_ctx, 16);
  c.num_blocks = layout == KvLayout::kPaged ? (c.max_model_len + block_size - 1) / block_size *
                                                  KvLayerGroupsFor(c).num_tables()
                                            : 1;
  auto cache = KvCache::Create(c);
  EXPECT_TRUE(cache.ok()) << cache.status();
  Filled f{std::move(*cache), {n_heads, n_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))}};
  EXPECT_TRUE(f.cache->AddSequence(1).ok());
  EXPECT_TRUE(f.cache->Append(1, n_ctx).ok());
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(n_kv * hd));
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int t = 0; t < n_ctx; ++t) {
      for (int kv = 0; kv < 2; ++kv) {
        for (float& v : row) v = dist(rng) * (kv == 0 ? 2.0f : 1.0f);
        KvEncodeRow(d, row.data(), f.cache->TokenRow(1, t, layer, kv), n_kv * hd);
      }
    }
  }
  if (!c.layer_windows.empty()) {
    f.cache->MarkComputed(1, std::vector<int32_t>(static_cast<size_t>(n_ctx - 1), 0));
  }
  return f;
}

std::vector<float> Query(int n_heads, int hd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(n_heads * hd));
  for (float& v : q) v = dist(rng);
  return q;
}

std::vector<const AttentionKernels*> Sets() {
  const AttentionKernels* sets[8];
  const int n = attention::AvailableAttentionKernels(sets, 8);
  return {sets, sets + n};
}

std::vector<float> Attend(const AttentionKernels& k, const Filled& f, const std::vector<float>& q,
                          int n_ctx) {
  const AttentionShape& s = f.shape;
  std::vector<float> out(static_cast<size_t>(s.n_heads * s.head_dim), -1.0f);
  std::vector<float> scratch(AttentionScratchFloats(s));
  attention::AttendOneWith(k, *f.cache, 1, kLayer, s, q.data(), n_ctx, 0, s.n_kv_heads, out.data(),
                           scratch.data());
  return out;
}

// Plain float64 attention over the decoded rows (the last f.shape.window of them when set,
// scores soft-capped when f.shape.softcap is).
std::vector<double> Reference(const Filled& f, const std::vector<float>& q, int n_ctx) {
  const AttentionShape& s = f.shape;
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads, n_row = s.n_kv_heads * hd;
  const KvDtype d = f.cache->config().dtype;
  const int first = s.window > 0 ? std::max(0, n_ctx - s.window) : 0, n = n_ctx - first;
  std::vector<float> k(static_cast<size_t>(n) * n_row), v(k.size());
  for (int t = 0; t < n; ++t) {
    KvDecodeRange(d, f.cache->TokenRow(1, first + t, kLayer, 0), n_row, 0, n_row, &k[t * n_row]);
    KvDecodeRange(d, f.cache->TokenRow(1, first + t, kLayer, 1), n_row, 0, n_row, &v[t * n_row]);
  }
  std::vector<double> out(static_cast<size_t>(s.n_heads * hd), 0.0);
  for (int h = 0; h < s.n_heads; ++h) {
    const size_t off = static_cast<size_t>(h / group) * hd;
    std::vector<double> p(static_cast<size_t>(n));
    double mx = -INFINITY, sum = 0;
    for (int t = 0; t < n; ++t) {
      double dot = 0;
      for (int i = 0; i < hd; ++i) dot += (double)q[h * hd + i] * k[t * n_row + off + i];
      if (s.softcap > 0) dot = s.softcap * std::tanh(dot / s.softcap);
      p[t] = dot * s.scale;
      mx = std::max(mx, p[t]);
    }
    for (double& x : p) sum += (x = std::exp(x - mx));
    for (int t = 0; t < n; ++t) {
      for (int i = 0; i < hd; ++i) out[h * hd + i] += p[t] / sum * v[t * n_row + off + i];
    }
  }
  return out;
}

// Float32 scoring, softmax and accumulation over N(0,1) values stay within 1e-4 absolute
// of the float64 result over the same decoded K/V (outputs are weighted means of the values,
// so of order 0.1..1: checked below, so that the comparison is never against zeros).
constexpr double kTol = 1e-4;

// The reference is computed before `spoil` runs (it may overwrite rows the result must not
// read).
template <class Spoil>
void ExpectNearReference(const Filled& f, int n_ctx, uint32_t q_seed, Spoil spoil) {
  const std::vector<float> q = Query(f.shape.n_heads, f.shape.head_dim, q_seed);
  const std::vector<double> ref = Reference(f, q, n_ctx);
  spoil();
  double ref_max = 0;
  for (double r : ref) ref_max = std::max(ref_max, std::fabs(r));
  ASSERT_GT(ref_max, 0.05);
  for (const AttentionKernels* k : Sets()) {
    const std::vector<float> out = Attend(*k, f, q, n_ctx);
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(out[i], ref[i], kTol) << k->name << " at " << i;
    }
  }
}

void ExpectNearReference(const Filled& f, int n_ctx, uint32_t q_seed) {
  ExpectNearReference(f, n_ctx, q_seed, [] {});
}

struct Gqa {
  int n_heads, n_kv, hd;
};
// Group sizes 1 (Llama 2), 2, 4 and 7 (Qwen2.5), head dims 8 (stories260K), 16, 64, 128.
constexpr Gqa kShapes[] = {{8, 4, 16}, {32, 8, 16}, {4, 4, 8}, {14, 2, 64}, {8, 8, 128}};

TEST(Attention, MatchesFloat64ReferenceForEveryFormatAndKernelSet) {
  for (KvDtype d : kAllKvDtypes) {
    for (const Gqa& g : kShapes) {
      for (int n_ctx : {1, 17, 300}) {  // (block sizes: PagedAndContiguousAreBitIdentical)
        SCOPED_TRACE(testing::Message() << KvDtypeName(d) << " heads " << g.n_heads << "/" << g.n_kv
                                        << "x" << g.hd << " ctx " << n_ctx);
        const Filled f = MakeCache(d, KvLayout::kPaged, 16, g.n_heads, g.n_kv, g.hd, n_ctx, 42);
        ExpectNearReference(f, n_ctx, 7);
      }
    }
  }
}

TEST(Attention, LongContextsMatchFloat64Reference) {
  for (KvDtype d : {KvDtype::kF16, KvDtype::kBF16, KvDtype::kQ8_0}) {
    SCOPED_TRACE(KvDtypeName(d));
    const Filled f = MakeCache(d, KvLayout::kPaged, 16, 8, 2, 128, 4096, 5);
    ExpectNearReference(f, 4096, 8);
    ExpectNearReference(f, 1029, 9);
  }
}

// A sliding window reads only the last `window` rows: rows before it are overwritten with NaN
// and the result still matches the float64 reference over the window; soft-capping too.
TEST(Attention, WindowReadsOnlyTheLastPositionsAndSoftcapMatchesReference) {
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kQ8_0, KvDtype::kFp8E4M3}) {
    for (int window : {1, 5, 16, 64, 400}) {
      for (int n_ctx : {1, 16, 17, 300}) {
        for (float softcap : {0.0f, 5.0f}) {
          SCOPED_TRACE(testing::Message() << KvDtypeName(d) << " window " << window << " ctx "
                                          << n_ctx << " softcap " << softcap);
          Filled f = MakeCache(d, KvLayout::kPaged, 16, 8, 4, 16, n_ctx, 21);
          f.shape.window = window;
          f.shape.softcap = softcap;
          ExpectNearReference(f, n_ctx, 13, [&] {
            std::vector<float> nan_row(4 * 16, std::nanf(""));
            for (int t = 0; t < n_ctx - window; ++t) {
              for (int kv = 0; kv < 2; ++kv) {
                KvEncodeRow(d, nan_row.data(), f.cache->TokenRow(1, t, kLayer, kv), 4 * 16);
              }
            }
          });
        }
      }
    }
  }
}

TEST(Attention, ContextsTheSequenceDoesNotHoldGiveZeros) {
  const Filled f = MakeCache(KvDtype::kF16, KvLayout::kPaged, 16, 8, 4, 32, 40, 6);
  const std::vector<float> q = Query(8, 32, 1);
  for (int n_ctx : {0, 100}) {
    const std::vector<float> out = Attend(attention::ActiveAttentionKernels(), f, q, n_ctx);
    for (float x : out) ASSERT_EQ(x, 0.0f) << n_ctx;
  }
}

TEST(Attention, PagedAndContiguousAreBitIdentical) {
  for (KvDtype d : kAllKvDtypes) {
    for (const Gqa& g : kShapes) {
      for (int n_ctx : {1, 300}) {  // one token; several tiles, each across blocks
        const std::vector<float> q = Query(g.n_heads, g.hd, 9);
        const Filled contiguous =
            MakeCache(d, KvLayout::kContiguous, 16, g.n_heads, g.n_kv, g.hd, n_ctx, 3);
        for (int bs : {8, 16, 256}) {
          const Filled paged =
              MakeCache(d, KvLayout::kPaged, bs, g.n_heads, g.n_kv, g.hd, n_ctx, 3);
          for (const AttentionKernels* k : Sets()) {
            const std::vector<float> want = Attend(*k, contiguous, q, n_ctx);
            const std::vector<float> got = Attend(*k, paged, q, n_ctx);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
                << k->name << " " << KvDtypeName(d) << " ctx " << n_ctx << " bs " << bs;
          }
        }
      }
    }
  }
}

// Also with the window layer's blocks before its window let go (the paged cache told the
// layer's window): the same rows are read.
TEST(Attention, WindowPagedAndContiguousAreBitIdentical) {
  const std::vector<float> q = Query(8, 16, 17);
  for (int n_ctx : {40, 300}) {
    Filled contiguous = MakeCache(KvDtype::kF16, KvLayout::kContiguous, 16, 8, 4, 16, n_ctx, 4);
    contiguous.shape.window = 37;
    for (int bs : {8, 16, 256}) {
      for (bool let_go : {false, true}) {
        Filled paged = MakeCache(KvDtype::kF16, KvLayout::kPaged, bs, 8, 4, 16, n_ctx, 4,
                                 let_go ? std::vector<int>{0, 37} : std::vector<int>{});
        paged.shape.window = 37;
        const bool gone = paged.cache->LayerBlockTable(1, kLayer)[0] == kNoBlock;
        ASSERT_EQ(gone, let_go && n_ctx - 37 >= bs) << "ctx " << n_ctx << " bs " << bs;
        for (const AttentionKernels* k : Sets()) {
          const std::vector<float> want = Attend(*k, contiguous, q, n_ctx);
          const std::vector<float> got = Attend(*k, paged, q, n_ctx);
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
              << k->name << " ctx " << n_ctx << " bs " << bs << (let_go ? " let go" : "");
        }
      }
    }
  }
}

TEST(Attention, SplittingKvHeadsGivesTheSameResult) {
  // Contexts of one tile and of several (with a partial last tile and chunk), kv heads one at
  // a time and in uneven runs: the prefetches and chunked kernel calls of a run of heads
  // must leave every head's sums as they are.
  for (KvDtype d : {KvDtype::kQ8_0, KvDtype::kF16, KvDtype::kFp8E4M3}) {
    for (int n_ctx : {100, 333}) {
      const Filled f = MakeCache(d, KvLayout::kPaged, 16, 32, 8, 32, n_ctx, 5);
      const std::vector<float> q = Query(32, 32, 11);
      for (const AttentionKernels* k : Sets()) {
        const std::vector<float> whole = Attend(*k, f, q, n_ctx);
        for (int run : {1, 3}) {
          std::vector<float> split(whole.size(), 0.0f);
          std::vector<float> scratch(AttentionScratchFloats(f.shape));
          for (int h = 0; h < 8; h += run) {
            attention::AttendOneWith(*k, *f.cache, 1, kLayer, f.shape, q.data(), n_ctx, h,
                                     std::min(8, h + run), split.data(), scratch.data());
          }
          EXPECT_EQ(std::memcmp(split.data(), whole.data(), whole.size() * sizeof(float)), 0)
              << k->name << " " << KvDtypeName(d) << " n_ctx " << n_ctx << " run " << run;
        }
      }
    }
  }
}

TEST(Attention, KvHeadsPerItemDividesTheHeadsAndFeedsEveryThread) {
  EXPECT_EQ(KvHeadsPerItem(32, 1, 2), 16);  // llama2-7b decode on 2 threads: 2 items
  EXPECT_EQ(KvHeadsPerItem(8, 1, 2), 4);    // llama3-8b
  EXPECT_EQ(KvHeadsPerItem(32, 1, 1), 32);  // one thread: whole rows
  EXPECT_EQ(KvHeadsPerItem(32, 512, 2), 32);
  EXPECT_EQ(KvHeadsPerItem(32, 2, 2), 8);  // several tokens: ~4 items per thread
  EXPECT_EQ(KvHeadsPerItem(5, 1, 2), 1);   // 5 heads: 5 items of 1
  EXPECT_EQ(KvHeadsPerItem(1, 1, 16), 1);
  EXPECT_EQ(KvHeadsPerItem(4, 1, 16), 1);
  for (int n_kv : {1, 2, 3, 4, 6, 8, 12, 32, 40, 64}) {
    for (int tokens : {1, 2, 3, 7, 64, 512}) {
      for (int threads : {1, 2, 3, 8, 64}) {
        const int per = KvHeadsPerItem(n_kv, tokens, threads);
        ASSERT_GE(per, 1);
        ASSERT_EQ(n_kv % per, 0) << n_kv << " " << tokens << " " << threads;
        const int64_t items = int64_t{tokens} * (n_kv / per);
        // Fewer items than threads only when even one head per item gives no more.
        if (per > 1) EXPECT_GE(items, threads) << n_kv << " " << tokens << " " << threads;
      }
    }
  }
}

}  // namespace
}  // namespace pinfer
