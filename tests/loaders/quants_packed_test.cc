// The packed (row-interleaved) 32-value weights and their kernels (loaders/quants_packed.h):
// PackRows round trips (UnpackRow gives every original row back; a partial last group's
// missing rows are zero blocks), and every kernel set's packed kernel gives, bit for bit, the
// per-block contract's floats (computed here from the original rows, independently of the
// layout; they are also the set's row kernel's, quants_q8a.h) for every (row, token) pair,
// over shapes that cross every edge of the sets' tiles (8 / 16 rows, 1..8 tokens, 64-token
// chunks), into a strided y whose other entries stay untouched. Each set runs where this CPU
// runs it and is skipped with a message otherwise.
#include "loaders/quants_packed.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/fp16.h"
#include "loaders/kernel_set.h"
#include "loaders/quants.h"
#include "loaders/quants_q8a.h"

namespace pinfer::quants {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0};

// Gaussian values times a per-32-value scale over two decades; never all zero.
std::vector<float> Values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> decades(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (int64_t b = 0; b < n; b += 32) {
    const float scale = std::pow(10.0f, decades(rng));
    for (int64_t j = b; j < b + 32; ++j) x[j] = scale * gauss(rng) + (j % 7 == 0 ? 0.1f : 0.0f);
  }
  return x;
}

std::vector<uint8_t> Rows(GgmlType t, int64_t rows, int64_t n, uint32_t seed) {
  const size_t rb = GgmlRowBytes(t, n);
  std::vector<uint8_t> w(rows * rb);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> x = Values(n, seed + static_cast<uint32_t>(r));
    QuantizeRow(t, x.data(), w.data() + r * rb, n);
  }
  return w;
}

std::vector<uint8_t> Acts(int n_tok, int64_t n, uint32_t seed) {
  std::vector<uint8_t> a(n_tok * Q8ARowBytes(n));
  for (int t = 0; t < n_tok; ++t) {
    const std::vector<float> x = Values(n, seed * 977 + t);
    ScalarQ8AKernels().quantize(x.data(), a.data() + t * Q8ARowBytes(n), n);
  }
  return a;
}

// The contract, from one original row: per block the exact int32 sum of codes x activation
// codes (Q4_0 less 8 * sum_a), acc = fma(d_w * d_a, float(i), acc), Q4_1 then
// acc = fma(m_w * d_a, float(sum_a), acc).
float Reference(GgmlType t, const uint8_t* row, const uint8_t* act, int64_t n) {
  const auto* a = reinterpret_cast<const BlockQ8A*>(act);
  const size_t bb = GgmlRowBytes(t, 32);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* blk = row + b * bb;
    uint16_t d, m = 0;
    std::memcpy(&d, blk, 2);
    if (t == GgmlType::kQ4_1) std::memcpy(&m, blk + 2, 2);
    int32_t dot = 0;
    for (int j = 0; j < 32; ++j) {
      int q;
      if (t == GgmlType::kQ8_0) {
        q = static_cast<int8_t>(blk[2 + j]);
      } else {
        const uint8_t byte = blk[(t == GgmlType::kQ4_1 ? 4 : 2) + j % 16];
        q = j < 16 ? byte & 0x0f : byte >> 4;
      }
      dot += q * a[b].qs[j];
    }
    if (t == GgmlType::kQ4_0) dot -= 8 * a[b].sum;
    acc = std::fma(Fp16ToFp32(d) * a[b].d, static_cast<float>(dot), acc);
    if (t == GgmlType::kQ4_1)
      acc = std::fma(Fp16ToFp32(m) * a[b].d, static_cast<float>(a[b].sum), acc);
  }
  return acc;
}

TEST(PackedLayout, SizesOfTheFormats) {
  EXPECT_TRUE(HasPackedLayout(GgmlType::kQ4_0));
  EXPECT_TRUE(HasPackedLayout(GgmlType::kQ4_1));
  EXPECT_TRUE(HasPackedLayout(GgmlType::kQ8_0));
  EXPECT_FALSE(HasPackedLayout(GgmlType::kF32));
  EXPECT_FALSE(HasPackedLayout(GgmlType::kQ5_0));
  EXPECT_EQ(PackedGroupBytes(GgmlType::kQ4_0, 4096), 128 * 144);
  EXPECT_EQ(PackedGroupBytes(GgmlType::kQ8_0, 64), 2 * 272);
  EXPECT_EQ(PackedBytes(GgmlType::kQ4_0, 9, 64), 2 * 2 * 144);
  EXPECT_EQ(PackedBytes(GgmlType::kQ4_1, 8, 32), 160);
  // Every group holds 8 rows: as many bytes as 8 original rows.
  for (GgmlType t : kTypes)
    EXPECT_EQ(PackedGroupBytes(t, 4096), 8 * static_cast<int64_t>(GgmlRowBytes(t, 4096)));
}

TEST(PackedLayout, PackRowsRoundTripsAndZeroFillsThePartialLastGroup) {
  for (GgmlType t : kTypes) {
    for (int64_t rows : {1, 7, 8, 9, 24, 31}) {
      const int64_t n = 96;
      const size_t rb = GgmlRowBytes(t, n);
      const std::vector<uint8_t> w = Rows(t, rows, n, 7);
      std::vector<uint8_t> p(PackedBytes(t, rows, n), 0xcd);
      PackRows(t, w.data(), static_cast<int64_t>(rb), rows, n, p.data());
      // Split by whole groups: the same bytes.
      std::vector<uint8_t> split(p.size(), 0xab);
      for (int64_t g = 0; g * 8 < rows; ++g) {
        PackRows(t, w.data() + g * 8 * rb, static_cast<int64_t>(rb),
                 std::min<int64_t>(8, rows - g * 8), n, split.data() + g * PackedGroupBytes(t, n));
      }
      EXPECT_EQ(split, p) << GgmlTypeInfoOf(t).name << " rows " << rows;
      std::vector<uint8_t> back(rb);
      const std::vector<uint8_t> zero(rb, 0);
      for (int64_t r = 0; r < (rows + 7) / 8 * 8; ++r) {
        UnpackRow(t, p.data(), r, n, back.data());
        if (r < rows) {
          EXPECT_EQ(0, std::memcmp(back.data(), w.data() + r * rb, rb))
              << GgmlTypeInfoOf(t).name << " rows " << rows << " row " << r;
        } else {
          EXPECT_EQ(back, zero) << GgmlTypeInfoOf(t).name << " rows " << rows << " row " << r;
        }
      }
    }
  }
}

TEST(PackedLayout, Q4_0ChunksHoldFourCodesOfEachRow) {
  const int64_t n = 32;
  const std::vector<uint8_t> w = Rows(GgmlType::kQ4_0, 8, n, 3);
  std::vector<uint8_t> p(PackedBytes(GgmlType::kQ4_0, 8, n));
  PackRows(GgmlType::kQ4_0, w.data(), 18, 8, n, p.data());
  const auto* b = reinterpret_cast<const BlockQ4_0x8*>(p.data());
  for (int i = 0; i < 8; ++i) {
    const auto* orig = reinterpret_cast<const BlockQ4_0*>(w.data() + 18 * i);
    EXPECT_EQ(b->d[i], orig->d);
    for (int c = 0; c < 4; ++c)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(b->qs[32 * c + 4 * i + k], orig->qs[4 * c + k]);
  }
}

class PackedKernels : public ::testing::TestWithParam<KernelSet> {};

TEST_P(PackedKernels, EveryPairIsTheContractsFloatsBitForBit) {
  const KernelSet s = GetParam();
  if (!KernelSetRuns(s)) GTEST_SKIP() << KernelSetName(s) << ": this build or CPU does not run it";
  const PackedQ8AKernels* k = PackedQ8AKernelsFor(s);
  if (k == nullptr) GTEST_SKIP() << KernelSetName(s) << " has no packed kernels";
  for (GgmlType t : kTypes) {
    const PackedDotFn dot = PackedDot(*k, t);
    if (dot == nullptr) continue;
    for (int64_t n : {32, 64, 4096 + 32}) {
      const std::vector<uint8_t> w = Rows(t, 31, n, 11);
      const size_t rb = GgmlRowBytes(t, n);
      const std::vector<uint8_t> acts = Acts(130, n, static_cast<uint32_t>(n));
      // want[t][r]: the contract from the original rows.
      std::vector<float> want(130 * 31);
      const int want_tok = n > 64 ? 64 : 130;
      for (int tok = 0; tok < want_tok; ++tok)
        for (int r = 0; r < 31; ++r)
          want[tok * 31 + r] =
              Reference(t, w.data() + r * rb, acts.data() + tok * Q8ARowBytes(n), n);
      // The reference is the set's row kernel (quants_q8a.h), bit for bit.
      const RowDotFn row_dot = Q8ARowDot(Q8AKernelsFor(s), t);
      std::vector<float> rows_y(want_tok);
      for (int r = 0; r < 31; ++r) {
        row_dot(w.data() + r * rb, acts.data(), Q8ARowBytes(n), want_tok, n, rows_y.data(), 1);
        for (int tok = 0; tok < want_tok; ++tok)
          ASSERT_EQ(0, std::memcmp(&rows_y[tok], &want[tok * 31 + r], 4))
              << KernelSetName(s) << " row kernel " << GgmlTypeInfoOf(t).name << " n=" << n
              << " row " << r << " token " << tok;
      }
      for (int64_t rows : {1, 7, 8, 9, 24, 31}) {
        std::vector<uint8_t> p(PackedBytes(t, rows, n));
        PackRows(t, w.data(), static_cast<int64_t>(rb), rows, n, p.data());
        std::vector<int> toks = {1, 2, 3, 5, 8, 13, 64};
        if (n <= 64) toks.push_back(130);  // past two token chunks (60 or 64 tokens)
        for (int n_tok : toks) {
          const int64_t stride = rows + 3;
          const float sentinel = -12345.5f;
          std::vector<float> y((n_tok + 1) * stride, sentinel);
          dot(p.data(), rows, acts.data(), Q8ARowBytes(n), n_tok, n, y.data(), stride);
          for (int tok = 0; tok <= n_tok; ++tok) {
            for (int64_t r = 0; r < stride; ++r) {
              const float got = y[tok * stride + r];
              if (tok < n_tok && r < rows) {
                const float expect = want[tok * 31 + r];
                ASSERT_EQ(0, std::memcmp(&got, &expect, 4))
                    << KernelSetName(s) << " " << GgmlTypeInfoOf(t).name << " n=" << n
                    << " rows=" << rows << " n_tok=" << n_tok << " row " << r << " token " << tok
                    << ": " << got << " want " << expect;
              } else {
                ASSERT_EQ(got, sentinel)
                    << KernelSetName(s) << " wrote outside: token " << tok << " entry " << r
                    << " rows=" << rows << " n_tok=" << n_tok;
              }
            }
          }
        }
      }
    }
  }
}

// The largest integer sums the formats allow: every code at an end of its range (Q4_0 / Q4_1
// nibbles 15, Q8_0 codes -128 and 127) against activations all -127 or all +127, so the sets'
// int16 steps (AVX2's vpmaddubsw pairs and their sums) are at their limits and must stay exact.
TEST_P(PackedKernels, ExtremeCodesAreExact) {
  const KernelSet s = GetParam();
  if (!KernelSetRuns(s)) GTEST_SKIP() << KernelSetName(s) << ": this build or CPU does not run it";
  const PackedQ8AKernels* k = PackedQ8AKernelsFor(s);
  if (k == nullptr) GTEST_SKIP() << KernelSetName(s) << " has no packed kernels";
  const int64_t n = 128, rows = 9;
  const int n_tok = 9;
  std::vector<uint8_t> acts(n_tok * Q8ARowBytes(n));
  for (int t = 0; t < n_tok; ++t) {
    auto* a = reinterpret_cast<BlockQ8A*>(acts.data() + t * Q8ARowBytes(n));
    for (int b = 0; b < n / 32; ++b) {
      const int8_t v = (t + b) % 2 == 0 ? 127 : -127;
      std::memset(a[b].qs, static_cast<uint8_t>(v), 32);
      a[b].sum = 32 * v;
      a[b].d = 0.5f + 0.25f * t;
    }
  }
  for (GgmlType t : kTypes) {
    const PackedDotFn dot = PackedDot(*k, t);
    if (dot == nullptr) continue;
    const size_t rb = GgmlRowBytes(t, n), bb = GgmlRowBytes(t, 32);
    std::vector<uint8_t> w(rows * rb);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < n / 32; ++b) {
        uint8_t* blk = w.data() + r * rb + b * bb;
        const uint16_t d = Fp32ToFp16(0.125f * static_cast<float>(1 + r));
        std::memcpy(blk, &d, 2);
        if (t == GgmlType::kQ4_1) std::memcpy(blk + 2, &d, 2);
        const uint8_t code = t == GgmlType::kQ8_0 ? ((r + b) % 2 == 0 ? 0x80 : 0x7f) : 0xff;
        std::memset(blk + (t == GgmlType::kQ4_1 ? 4 : 2), code, t == GgmlType::kQ8_0 ? 32 : 16);
      }
    }
    std::vector<uint8_t> p(PackedBytes(t, rows, n));
    PackRows(t, w.data(), static_cast<int64_t>(rb), rows, n, p.data());
    std::vector<float> y(n_tok * rows);
    dot(p.data(), rows, acts.data(), Q8ARowBytes(n), n_tok, n, y.data(), rows);
    for (int tok = 0; tok < n_tok; ++tok) {
      for (int64_t r = 0; r < rows; ++r) {
        const float want = Reference(t, w.data() + r * rb, acts.data() + tok * Q8ARowBytes(n), n);
        ASSERT_EQ(0, std::memcmp(&y[tok * rows + r], &want, 4))
            << KernelSetName(s) << " " << GgmlTypeInfoOf(t).name << " row " << r << " token " << tok
            << ": " << y[tok * rows + r] << " want " << want;
      }
    }
  }
}

TEST(PackedTables, ScalarOnEveryBuildAndTheTablesNameTheirSets) {
  ASSERT_NE(PackedQ8AKernelsFor(KernelSet::kScalar), nullptr);
  EXPECT_STREQ(PackedQ8AKernelsFor(KernelSet::kScalar)->name, "scalar");
  for (KernelSet s : kAllKernelSets) {
    const PackedQ8AKernels* k = PackedQ8AKernelsFor(s);
    if (k != nullptr) {
      EXPECT_STREQ(k->name, KernelSetName(s));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sets, PackedKernels,
                         ::testing::Values(KernelSet::kScalar, KernelSet::kAvx2,
                                           KernelSet::kAvxVnni, KernelSet::kAvx512Vnni,
                                           KernelSet::kNeon),
                         [](const ::testing::TestParamInfo<KernelSet>& i) {
                           return std::string(KernelSetName(i.param));
                         });

}  // namespace
}  // namespace pinfer::quants
