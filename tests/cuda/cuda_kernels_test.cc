// The CUDA element-wise and KV kernels against the CPU reference on seeded random non-zero
// data: RMSNorm, SwiGLU, bias add, RoPE (as the KV write applies it), the KV write in every KV
// format, and paged attention (whole and split contexts). Output buffers are filled with NaN
// (bytes 0xFF) before each launch, so an element a kernel fails to write shows up. Every test
// that needs a device skips, saying why, without one.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/kernels.h"
#include "engine/cpu/ops.h"
#include "engine/model/model_config.h"
#include "gtest/gtest.h"
#include "kvcache/attention.h"
#include "kvcache/kv_codec.h"
#include "tests/cuda/cuda_test_support.h"

namespace pinfer::cuda {
namespace {

// ---- element-wise kernels (tolerance 1e-5 relative; RoPE 1e-5 too: the frequencies come
// from the host, so only the device's sinf/cosf differ, by a few ulp) ----

TEST(CudaKernels, RmsNormMatchesCpu) {
  REQUIRE_CUDA();
  const int rows = 5, dim = 96;
  const auto x = Random(rows * dim, 1), w = Random(dim, 2);
  std::vector<float> want(x.size());
  for (int r = 0; r < rows; ++r) RmsNorm(&x[r * dim], w.data(), dim, 1e-5f, &want[r * dim]);
  DevBuf<float> dx(x), dw(w), out(x.size());
  ASSERT_EQ(LaunchRmsNorm(dx.get(), nullptr, dw.get(), rows, dim, 1e-5f, out.get(), nullptr),
            cudaSuccess);
  ExpectClose(out.Download(), want, 1e-5, "rmsnorm");
  // Gathered rows (the logits rows of a step).
  DevBuf<int32_t> idx(std::vector<int32_t>{4, 1});
  DevBuf<float> out2(2 * dim);
  ASSERT_EQ(LaunchRmsNorm(dx.get(), idx.get(), dw.get(), 2, dim, 1e-5f, out2.get(), nullptr),
            cudaSuccess);
  std::vector<float> want2(want.begin() + 4 * dim, want.end());
  want2.insert(want2.end(), want.begin() + dim, want.begin() + 2 * dim);
  ExpectClose(out2.Download(), want2, 1e-5, "rmsnorm gathered");
}

// RoPE as the device applies it, fused into the KV write (LaunchRopeKvWrite): q
// ([n x heads x hd]) rotated in place and k ([n x kv_heads x hd]) on its way into an f32 KV
// row of a one-block pool, read back into *k.
struct RopeCase {
  int heads, kv_heads, hd;
  std::vector<int32_t> pos;
  float theta, scale = 1.0f;
  std::vector<float> factors;  // empty: none
};

void RopeOnDevice(const RopeCase& r, RopeStyle style, std::vector<float>* q,
                  std::vector<float>* k) {
  const int n = static_cast<int>(r.pos.size()), kv_dim = r.kv_heads * r.hd;
  KvLayerView kv;
  kv.dtype = kKF32;
  kv.row_bytes = kv_dim * sizeof(float);
  kv.block_size = n;
  kv.v_offset = n * kv.row_bytes;
  kv.block_bytes = 2 * kv.v_offset;
  kv.kv_dim = kv_dim;
  DevBuf<uint8_t> pool(kv.block_bytes);
  kv.base = pool.get();
  std::vector<int64_t> slot(n);
  for (int t = 0; t < n; ++t) slot[t] = t * static_cast<int64_t>(kv.row_bytes);
  DevBuf<float> dq(*q), dk(*k), dv(k->size()), dfreq(RopeFrequencies(r.theta, r.hd));
  DevBuf<float> dfac(r.factors.empty() ? std::vector<float>{1.0f} : r.factors);
  DevBuf<int32_t> dpos(r.pos);
  DevBuf<int64_t> dslot(slot);
  ASSERT_EQ(LaunchRopeKvWrite(kv, dq.get(), r.heads, dk.get(), dv.get(), n, dslot.get(), r.hd,
                              dpos.get(), dfreq.get(), style == RopeStyle::kHalves, nullptr,
                              r.scale, r.factors.empty() ? nullptr : dfac.get()),
            cudaSuccess);
  *q = dq.Download();
  const std::vector<uint8_t> rows = pool.Download();
  std::memcpy(k->data(), rows.data(), k->size() * sizeof(float));
}

// q and k rotated on the device and by ApplyRope, for both pair orders, within 1e-5.
void ExpectRopeMatchesCpu(const RopeCase& r, uint32_t seed) {
  const int n = static_cast<int>(r.pos.size());
  const float* factors = r.factors.empty() ? nullptr : r.factors.data();
  for (RopeStyle style : {RopeStyle::kAdjacentPairs, RopeStyle::kHalves}) {
    const std::string name = style == RopeStyle::kHalves ? "rope halves" : "rope pairs";
    std::vector<float> q = Random(n * r.heads * r.hd, seed),
                       k = Random(n * r.kv_heads * r.hd, seed + 1);
    std::vector<float> want_q = q, want_k = k;
    RopeOnDevice(r, style, &q, &k);
    for (int t = 0; t < n; ++t) {
      ApplyRope(&want_q[t * r.heads * r.hd], r.heads, r.hd, r.pos[t], r.theta, style, r.scale,
                factors);
      ApplyRope(&want_k[t * r.kv_heads * r.hd], r.kv_heads, r.hd, r.pos[t], r.theta, style, r.scale,
                factors);
    }
    ExpectClose(q, want_q, 1e-5, name + ": q");
    ExpectClose(k, want_k, 1e-5, name + ": k");
  }
}

TEST(CudaKernels, RopeMatchesCpuBothPairOrders) {
  REQUIRE_CUDA();
  ExpectRopeMatchesCpu(RopeCase{3, 2, 64, {0, 7, 100, 3000}, 10000.0f, 1.0f, {}}, 3);
}

// Llama 3.1's per-pair factors and a linear scale, together.
TEST(CudaKernels, RopeScalingMatchesCpu) {
  REQUIRE_CUDA();
  ExpectRopeMatchesCpu(RopeCase{2,
                                1,
                                128,
                                {0, 9, 700, 5000},
                                500000.0f,
                                0.5f,
                                Llama3RopeFactors(500000.0f, 128, 8, 1, 4, 8192)},
                       6);
}

TEST(CudaKernels, SwiGluAddBiasMatchCpu) {
  REQUIRE_CUDA();
  const int rows = 3, width = 100;
  auto g = Random(rows * width, 4, -4, 4);
  const auto u = Random(rows * width, 5), b = Random(width, 6);
  DevBuf<float> dg(g), du(u), db(b);
  ASSERT_EQ(LaunchSwiGlu(dg.get(), du.get(), rows * width, nullptr), cudaSuccess);
  SwiGlu(g.data(), u.data(), rows * width);
  ExpectClose(dg.Download(), g, 1e-5, "swiglu");
  ASSERT_EQ(LaunchAddBias(dg.get(), db.get(), rows, width, nullptr), cudaSuccess);
  for (int r = 0; r < rows; ++r) AddInPlace(&g[r * width], b.data(), width);
  ExpectClose(dg.Download(), g, 1e-6, "bias");
}

// ---- KV: row encoding and paged attention in every KV format ----

struct HostKv {
  std::unique_ptr<KvCache> cache;
  KvCacheConfig cfg;
};

HostKv MakeHostKv(KvDtype d, int layers, int kv_heads, int hd) {
  HostKv h;
  h.cfg.n_layers = layers;
  h.cfg.n_kv_heads = kv_heads;
  h.cfg.head_dim = hd;
  h.cfg.dtype = d;
  h.cfg.block_size = 16;
  h.cfg.max_model_len = 256;
  h.cfg.max_num_seqs = 4;
  h.cfg.num_blocks = 12;
  h.cfg.prefix_caching = false;
  auto c = KvCache::Create(h.cfg);
  EXPECT_TRUE(c.ok()) << c.status();
  h.cache = std::move(*c);
  return h;
}

KvLayerView View(const KvCache& cache, int layer, uint8_t* base, int kv_dim) {
  KvLayerView kv;
  kv.dtype = static_cast<int>(cache.config().dtype);
  kv.base = base;
  kv.block_bytes = cache.block_bytes();
  kv.row_bytes = cache.row_bytes();
  kv.block_size = cache.block_size();
  kv.v_offset = kv.block_size * kv.row_bytes;
  kv.layer_offset = static_cast<size_t>(layer) * 2 * kv.v_offset;
  kv.kv_dim = kv_dim;
  return kv;
}

// A KV write of tokens at `positions` of sequence 1 into layer 1, plus one padding row (slot
// -1) that must write nothing.
struct KvWriteCase {
  KvDtype d;
  bool rope;  // false: RoPE at position 0 (the identity), so K goes in as given
  RopeStyle style;
  std::string name;
  std::vector<int> positions;
  int kv_heads, hd;
};

// How far a decoded value written by the device may be from the CPU's encoding of the same
// value: one quantization step where the format rounds to blocks, plus (rotated K only) the
// last-bit differences of the rotation (FMA contraction), which the format's rounding can
// turn into one of its own steps.
double KvWriteTolerance(KvDtype d, bool rotated, double magnitude) {
  const double step = d == KvDtype::kQ4_0 ? 3.0 / 8 : d == KvDtype::kQ8_0 ? 3.0 / 127 : 0;
  const double rel = !rotated                 ? 0.0
                     : d == KvDtype::kF32     ? 1e-6
                     : d == KvDtype::kF16     ? 1e-3
                     : d == KvDtype::kBF16    ? 8e-3
                     : d == KvDtype::kFp8E4M3 ? 0.13
                                              : 0.0;
  return step * 1.01 + rel * magnitude + 1e-30;
}

// The device's pool bytes (got) hold, for each token, the CPU's encoding of k_want and v
// within KvWriteTolerance, and nothing else was written (every other byte is still 0xFF).
void ExpectRowsMatchCpuEncoding(const KvWriteCase& w, KvCache& c, const std::vector<uint8_t>& got,
                                const std::vector<float>& k_want, const std::vector<float>& v) {
  const int kv_dim = w.kv_heads * w.hd;
  std::vector<bool> written(got.size(), false);
  const uint8_t* host_base = c.Row(0, 0, 0, 0);
  for (size_t t = 0; t < w.positions.size(); ++t) {
    for (int which = 0; which < 2; ++which) {
      uint8_t* row = c.TokenRow(1, w.positions[t], 1, which);
      KvEncodeRow(w.d, (which ? v : k_want).data() + t * kv_dim, row, kv_dim);
      std::fill_n(written.begin() + (row - host_base), c.row_bytes(), true);
      std::vector<float> a(kv_dim), b(kv_dim);
      KvDecodeRange(w.d, &got[row - host_base], kv_dim, 0, kv_dim, a.data());
      KvDecodeRange(w.d, row, kv_dim, 0, kv_dim, b.data());
      double row_max = 0;
      for (float x : b) row_max = std::max(row_max, std::fabs(static_cast<double>(x)));
      for (int i = 0; i < kv_dim; ++i) {
        // fp8 rounds relative to each value; the others relative to the row (cancellation
        // in x0 c - x1 s leaves small values with large relative error).
        const double mag = w.d == KvDtype::kFp8E4M3 ? std::fabs(b[i]) : row_max;
        ASSERT_LE(std::fabs(a[i] - b[i]), KvWriteTolerance(w.d, w.rope && which == 0, mag))
            << w.name << " token " << t << (which ? " v" : " k") << " value " << i;
      }
    }
  }
  size_t untouched_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) untouched_diff += !written[i] && got[i] != 0xFF;
  EXPECT_EQ(untouched_diff, 0u) << w.name << ": bytes outside the written rows changed";
}

// Runs LaunchRopeKvWrite for the case (heads query heads) and checks q, k and the pool.
void CheckKvWrite(const KvWriteCase& w, int heads) {
  const int kv_dim = w.kv_heads * w.hd, n = static_cast<int>(w.positions.size());
  HostKv h = MakeHostKv(w.d, 2, w.kv_heads, w.hd);
  KvCache& c = *h.cache;
  ASSERT_TRUE(c.AddSequence(1).ok());
  ASSERT_TRUE(c.Append(1, 21).ok());
  const auto k = Random((n + 1) * kv_dim, 10, -3, 3), v = Random((n + 1) * kv_dim, 11, -3, 3);
  std::vector<int64_t> slot(n + 1, -1);  // the last row: a CUDA graph's padding row
  const auto table = c.BlockTable(1);
  for (int t = 0; t < n; ++t) {
    slot[t] = static_cast<int64_t>(table[w.positions[t] / 16]) * c.block_bytes() +
              (w.positions[t] % 16) * c.row_bytes();
  }
  std::vector<int32_t> pos(n + 1, 0);  // the padding row at position 0
  if (w.rope) std::copy(w.positions.begin(), w.positions.end(), pos.begin());
  DevBuf<uint8_t> dpool(c.block_bytes() * c.num_blocks());  // poisoned: bytes 0xFF
  std::vector<float> q = Random((n + 1) * heads * w.hd, 12), k_want = k;
  DevBuf<float> dk(k), dv(v), dq(q), dfreq(RopeFrequencies(10000.0f, w.hd));
  DevBuf<int64_t> ds(slot);
  DevBuf<int32_t> dpos(pos);
  ASSERT_EQ(LaunchRopeKvWrite(View(c, 1, dpool.get(), kv_dim), dq.get(), heads, dk.get(), dv.get(),
                              n + 1, ds.get(), w.hd, dpos.get(), dfreq.get(),
                              w.style == RopeStyle::kHalves, nullptr),
            cudaSuccess);
  for (int t = 0; t <= n; ++t) {
    ApplyRope(&q[t * heads * w.hd], heads, w.hd, pos[t], 10000.0f, w.style);
    ApplyRope(&k_want[t * kv_dim], w.kv_heads, w.hd, pos[t], 10000.0f, w.style);
  }
  ExpectClose(dq.Download(), q, 1e-5, "q " + w.name);
  EXPECT_EQ(dk.Download(), k) << w.name << ": k itself must stay unrotated";
  ExpectRowsMatchCpuEncoding(w, c, dpool.Download(), k_want, v);
}

// The GPU writes the same bytes as KvEncodeRow (block formats: decoded values within one
// quantization step, should the CPU compiler have fused a multiply-add), and nothing else.
// With RoPE at position 0 (K as given) and at real positions (K rotated on its way in, q in
// place; both pair orders): the rows hold the CPU's encoding of the (rotated) values, within
// one quantization step where the encoding rounds; q as ApplyRope leaves it, 1e-5.
TEST(CudaKernels, KvWriteMatchesCpuEncoding) {
  REQUIRE_CUDA();
  struct Mode {
    bool rope;
    RopeStyle style;
    const char* name;
  };
  for (const Mode mode :
       {Mode{false, RopeStyle::kHalves, ""}, Mode{true, RopeStyle::kHalves, " rope halves"},
        Mode{true, RopeStyle::kAdjacentPairs, " rope pairs"}}) {
    for (KvDtype d : kAllKvDtypes) {
      const KvWriteCase w{
          d, mode.rope, mode.style, std::string(KvDtypeName(d)) + mode.name, {0, 15, 16, 20},
          2, 64};
      CheckKvWrite(w, /*heads=*/4);
    }
  }
}

// Split attention's geometry (no device needed): about two blocks per SM for one sequence,
// splits a multiple of kAttnMinSplitLen that cover the context in at most max_splits.
TEST(CudaAttentionSplits, CountAndLength) {
  EXPECT_EQ(AttentionMaxSplits(32, 132), 9);  // llama2-7b on an H100/H200
  EXPECT_EQ(AttentionMaxSplits(8, 132), 33);
  EXPECT_EQ(AttentionMaxSplits(1, 1000), kAttnMaxSplits);
  EXPECT_EQ(AttentionMaxSplits(64, 16), 1);
  for (int splits : {1, 3, 9, 64}) {
    for (int ctx : {1, 31, 32, 33, 100, 4096, 131072}) {
      const int len = AttentionSplitLen(ctx, splits);
      EXPECT_EQ(len % kAttnMinSplitLen, 0);
      EXPECT_LE((ctx + len - 1) / len, splits) << ctx << " positions in " << splits;
      EXPECT_GE(len * splits, ctx);
    }
  }
}

// A step of attention: tokens of two sequences whose blocks interleave in the pool, with
// the CPU's result and the device inputs (the pool copied up, block tables, positions).
struct AttentionStep {
  int heads = 8, kv_heads = 2, hd = 0, layers = 2;
  std::vector<SeqId> seq;
  std::vector<int32_t> pos, tables, table_start;
  std::vector<float> q, want;
  float scale = 0;
};

// Sequences 1 (100 positions) and 2 (20), their blocks interleaved; every row random. The
// step: sequence 1 positions 93..99 (a prefill chunk) and sequence 2 position 19 (a decode).
AttentionStep MakeAttentionStep(KvCache& c, int hd) {
  AttentionStep a;
  a.hd = hd;
  const int kv_dim = a.kv_heads * hd;
  EXPECT_TRUE(c.AddSequence(1).ok());
  EXPECT_TRUE(c.AddSequence(2).ok());
  for (auto [s, n] : {std::pair{1, 10}, std::pair{2, 10}, std::pair{1, 90}, std::pair{2, 10}}) {
    EXPECT_TRUE(c.Append(s, n).ok());
  }
  uint32_t seed = 20;
  for (SeqId s : {1, 2}) {
    for (int p = 0; p < c.num_tokens(s); ++p) {
      for (int l = 0; l < a.layers; ++l) {
        for (int which = 0; which < 2; ++which) {
          const auto vals = Random(kv_dim, seed++, -2, 2);
          KvEncodeRow(c.config().dtype, vals.data(), c.TokenRow(s, p, l, which), kv_dim);
        }
      }
    }
  }
  for (int p = 93; p < 100; ++p) a.seq.push_back(1), a.pos.push_back(p);
  a.seq.push_back(2), a.pos.push_back(19);
  const int n = static_cast<int>(a.seq.size());
  a.q = Random(n * a.heads * hd, 99);
  a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const AttentionShape shape{a.heads, a.kv_heads, hd, a.scale};
  a.want.resize(a.q.size());
  for (int t = 0; t < n; ++t) {
    std::vector<float> scratch(AttentionScratchFloats(shape));
    AttendOne(c, a.seq[t], 1, shape, &a.q[t * a.heads * hd], a.pos[t] + 1, 0, a.kv_heads,
              &a.want[t * a.heads * hd], scratch.data());
  }
  std::vector<int32_t> start;
  for (SeqId s : {1, 2}) {
    start.push_back(static_cast<int32_t>(a.tables.size()));
    for (int32_t b : c.BlockTable(s)) a.tables.push_back(b);
  }
  for (int t = 0; t < n; ++t) a.table_start.push_back(start[a.seq[t] - 1]);
  return a;
}

// Split over the context (decode steps), merged in the same launch by the last split of each
// (token, head). Contexts of 94..100 positions: 1 split of 128 (max 1), 2 of 64 (max 2), 3 or
// 4 of 32, the last one partial (max 4 and 8); the context of 20: 1 split of 32. The scratch
// starts zeroed, as its counters need, and each launch leaves them at zero: a launch of the
// first token only (the scratch's prefix), then of all tokens again (a graph replay), merge
// alike.
void CheckSplitAttention(const AttentionStep& a, const KvLayerView& kv, const std::string& name) {
  const int n = static_cast<int>(a.seq.size());
  DevBuf<float> dq(a.q);
  DevBuf<int32_t> dtab(a.tables), dstart(a.table_start), dpos(a.pos);
  for (int max_splits : {1, 2, 4, 8}) {
    const std::string what = name + " max_splits " + std::to_string(max_splits);
    DevBuf<float> scratch(std::vector<float>(AttentionSplitFloats(n, a.heads, a.hd, max_splits)));
    for (int tokens : {n, 1, n}) {
      const std::vector<float> want(a.want.begin(), a.want.begin() + tokens * a.heads * a.hd);
      DevBuf<float> out(want.size());
      ASSERT_EQ(
          LaunchAttention(kv, dq.get(), tokens, a.heads, a.kv_heads, a.hd, a.scale, dtab.get(),
                          dstart.get(), dpos.get(), out.get(), nullptr, scratch.get(), max_splits),
          cudaSuccess);
      ExpectClose(out.Download(), want, 1e-4,
                  "split attention " + what + ", " + std::to_string(tokens) + " tokens");
    }
  }
}

// Two sequences with interleaved (non-contiguous) block tables; a prefill chunk of one and a
// decode token of the other, GQA 8/2 heads, head_dim 64, 96 (not a multiple of the warp) and
// 256 (the kernel's largest); 1e-4 relative to the largest output.
TEST(CudaKernels, PagedAttentionMatchesCpuEveryKvFormat) {
  REQUIRE_CUDA();
  for (const int hd : {64, 96, 256}) {
    for (KvDtype d : kAllKvDtypes) {
      const std::string name = std::string(KvDtypeName(d)) + " head_dim " + std::to_string(hd);
      HostKv h = MakeHostKv(d, 2, 2, hd);
      KvCache& c = *h.cache;
      const AttentionStep a = MakeAttentionStep(c, hd);
      const size_t pool = c.block_bytes() * c.num_blocks();
      DevBuf<uint8_t> dpool(std::vector<uint8_t>(c.Row(0, 0, 0, 0), c.Row(0, 0, 0, 0) + pool));
      const KvLayerView kv = View(c, 1, dpool.get(), a.kv_heads * hd);
      DevBuf<float> dq(a.q), out(a.want.size());
      DevBuf<int32_t> dtab(a.tables), dstart(a.table_start), dpos(a.pos);
      ASSERT_EQ(
          LaunchAttention(kv, dq.get(), static_cast<int>(a.seq.size()), a.heads, a.kv_heads, hd,
                          a.scale, dtab.get(), dstart.get(), dpos.get(), out.get(), nullptr),
          cudaSuccess);
      ExpectClose(out.Download(), a.want, 1e-4, "attention " + name);
      CheckSplitAttention(a, kv, name);
    }
  }
}

}  // namespace
}  // namespace pinfer::cuda
