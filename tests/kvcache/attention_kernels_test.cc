// Each attention kernel set against the scalar set, kernel by kernel, on random rows of every
// KV format: scores within float rounding of the scalar dot products, exp within a few ulp
// of std::exp, and the weighted value sums bit-identical (the same fused multiply-adds in the
// same order per element).
#include "kvcache/attention_kernels.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kvcache/kv_codec.h"

namespace pinfer::attention {
namespace {

std::vector<const AttentionKernels*> NonScalarSets() {
  const AttentionKernels* sets[8];
  const int n = AvailableAttentionKernels(sets, 8);
  EXPECT_GE(n, 1);
  EXPECT_EQ(std::string(sets[n - 1]->name), "scalar");
  return {sets, sets + n - 1};
}

TEST(AttentionKernels, TheCpusSetsAreListedBestFirst) {
  const AttentionKernels* sets[8];
  [[maybe_unused]] const int n = AvailableAttentionKernels(sets, 8);
  // The active set is the process's kernel set (PAGEDINFER_KERNELS may force scalar); the
  // avxvnni set runs the AVX2 attention kernels.
  EXPECT_EQ(std::string(ActiveAttentionKernels().name),
            UsesAvx2Kernels(ActiveKernelSet()) ? "avx2" : KernelSetName(ActiveKernelSet()));
  if (std::getenv("PAGEDINFER_KERNELS") == nullptr) {
    EXPECT_EQ(std::string(ActiveAttentionKernels().name), sets[0]->name);
  }
#if defined(__x86_64__) || defined(_M_X64)
  if (CpuRunsAvx2Fma16c()) {
    ASSERT_GE(n, 2);
    EXPECT_EQ(std::string(sets[0]->name), "avx2");
  }
#endif
#if defined(__aarch64__)
  ASSERT_GE(n, 2);
  EXPECT_EQ(std::string(sets[0]->name), "neon");
#endif
  if (NonScalarSets().empty()) GTEST_SKIP() << "this CPU runs only the scalar set";
}

// n_rows rows of n_kv * hd random values (N(0,1), never all zero) in format d.
struct Tile {
  std::vector<std::vector<uint8_t>> encoded;
  std::vector<const uint8_t*> rows;
};
Tile MakeTile(KvDtype d, int n_rows, int64_t n_row, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tile t;
  std::vector<float> x(static_cast<size_t>(n_row));
  for (int j = 0; j < n_rows; ++j) {
    for (float& v : x) v = dist(rng);
    t.encoded.emplace_back(*KvRowBytes(d, n_row));
    KvEncodeRow(d, x.data(), t.encoded.back().data(), n_row);
    t.rows.push_back(t.encoded.back().data());
  }
  return t;
}

std::vector<float> Random(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

struct Case {
  int n_q, n_kv, hd, n;
};
// Head groups 1..9 (every split of 8/4/2/1), head dims 8..128, partial tiles.
// Rows are multiples of 32 values, as the block formats need.
constexpr Case kCases[] = {{1, 4, 128, kTile}, {2, 2, 64, 37}, {3, 1, 32, 5},   {7, 2, 128, 64},
                           {8, 2, 16, 63},     {9, 4, 8, 1},   {4, 8, 128, 64}, {5, 4, 24, 13}};

TEST(AttentionKernels, ScoresMatchTheScalarSet) {
  for (const AttentionKernels* k : NonScalarSets()) {
    for (KvDtype d : kAllKvDtypes) {
      for (const Case& c : kCases) {
        SCOPED_TRACE(testing::Message() << k->name << " " << KvDtypeName(d) << " heads " << c.n_q
                                        << " hd " << c.hd << " n " << c.n);
        const int64_t n_row = int64_t{c.n_kv} * c.hd;
        const Tile tile = MakeTile(d, c.n, n_row, 3);
        const std::vector<float> q = Random(static_cast<size_t>(c.n_q) * c.hd, 4, -1, 1);
        std::vector<float> buf(static_cast<size_t>(kTile) * c.hd);
        for (int kv = 0; kv < c.n_kv; ++kv) {
          const HeadRows rows{tile.rows.data(), c.n, d, n_row, int64_t{kv} * c.hd, c.hd};
          std::vector<float> want(static_cast<size_t>(c.n_q) * kTile, 0.0f);
          std::vector<float> got(want.size(), 0.0f), decoded(static_cast<size_t>(c.hd));
          ScalarAttentionKernels().score(rows, q.data(), c.n_q, 0.5f, want.data(), buf.data());
          k->score(rows, q.data(), c.n_q, 0.5f, got.data(), buf.data());
          for (int h = 0; h < c.n_q; ++h) {
            for (int j = 0; j < c.n; ++j) {
              // Bound: float32 rounding of a sum of hd products, relative to sum |q_i k_i|.
              KvDecodeRange(d, tile.rows[j], n_row, rows.begin, c.hd, decoded.data());
              double mag = 0;
              for (int i = 0; i < c.hd; ++i) mag += std::fabs(q[h * c.hd + i] * decoded[i]);
              const size_t at = static_cast<size_t>(h) * kTile + j;
              ASSERT_NEAR(got[at], want[at], 0.5 * mag * c.hd * 1.2e-7 + 1e-30) << h << "," << j;
            }
          }
        }
      }
    }
  }
}

TEST(AttentionKernels, WeightedValueSumsAreBitIdenticalToTheScalarSet) {
  for (const AttentionKernels* k : NonScalarSets()) {
    for (KvDtype d : kAllKvDtypes) {
      for (const Case& c : kCases) {
        SCOPED_TRACE(testing::Message() << k->name << " " << KvDtypeName(d) << " heads " << c.n_q
                                        << " hd " << c.hd << " n " << c.n);
        const int64_t n_row = int64_t{c.n_kv} * c.hd;
        const Tile tile = MakeTile(d, c.n, n_row, 5);
        const std::vector<float> p = Random(static_cast<size_t>(c.n_q) * kTile, 6, 0, 1);
        const std::vector<float> acc0 = Random(static_cast<size_t>(c.n_q) * c.hd, 7, -2, 2);
        std::vector<float> buf(static_cast<size_t>(kTile) * c.hd);
        for (int kv = 0; kv < c.n_kv; ++kv) {
          const HeadRows rows{tile.rows.data(), c.n, d, n_row, int64_t{kv} * c.hd, c.hd};
          std::vector<float> want = acc0, got = acc0;
          ScalarAttentionKernels().accumulate(rows, p.data(), c.n_q, want.data(), buf.data());
          k->accumulate(rows, p.data(), c.n_q, got.data(), buf.data());
          ASSERT_NE(want, acc0);
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "kv " << kv;
        }
      }
    }
  }
}

TEST(AttentionKernels, ExpIsWithinFourUlpOfStdExp) {
  for (const AttentionKernels* k : NonScalarSets()) {
    for (int n : {1, 7, 8, 9, 31, 64}) {
      // Shifted scores x - m over [-87, 0], the range attention uses.
      std::vector<float> s = Random(static_cast<size_t>(n), 8 + n, -80, 7);
      float m = s[0];
      for (float x : s) m = std::max(m, x);
      const std::vector<float> x = s;
      const float sum = k->exp_sum(s.data(), n, m);
      double want_sum = 0;
      for (int j = 0; j < n; ++j) {
        const float want = std::exp(x[j] - m);
        want_sum += want;
        ASSERT_NEAR(s[j], want, 4 * 6e-8 * want) << k->name << " exp(" << x[j] - m << ")";
      }
      EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum) << k->name << " n " << n;
    }
    std::vector<float> grid;
    for (float x = -87.0f; x <= 0.0f; x += 0.0137f) grid.push_back(x);
    const std::vector<float> x = grid;
    for (size_t i = 0; i < grid.size(); i += kTile) {
      const int n = static_cast<int>(std::min<size_t>(kTile, grid.size() - i));
      k->exp_sum(grid.data() + i, n, 0.0f);
    }
    for (size_t i = 0; i < grid.size(); ++i) {
      const float want = std::exp(x[i]);
      ASSERT_NEAR(grid[i], want, 4 * 6e-8 * want) << k->name << " exp(" << x[i] << ")";
    }
  }
}

}  // namespace
}  // namespace pinfer::attention
