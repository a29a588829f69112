// Row-packed K-quant weights (loaders/quants_packed_k.h): packing round-trips to the file's
// rows, and every set's packed kernel gives, for each (row, token), bit for bit what the row
// kernel of quants_q8k.h gives on the file row (random blocks: every code, scale and min byte
// random, so the 6-bit scales and mins are mostly nonzero), over sizes, row counts that end
// mid-group, token counts that end mid-tile, a strided y, and y left untouched outside the
// n_rows x n_tok pairs. Sets the CPU lacks are skipped with a message.
#include "loaders/quants_packed_k.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/fp16.h"
#include "loaders/kernel_set.h"
#include "loaders/quants_packed.h"
#include "loaders/quants_q8k.h"

namespace pinfer::quants {
namespace {

struct Format {
  const char* name;
  GgmlType type;
  RowDotFn KQuantKernels::*row;
  PackedDotFn PackedKQuantKernels::*packed;
};
const Format kFormats[] = {
    {"Q4_K", GgmlType::kQ4_K, &KQuantKernels::q4_k, &PackedKQuantKernels::q4_k},
    {"Q5_K", GgmlType::kQ5_K, &KQuantKernels::q5_k, &PackedKQuantKernels::q5_k},
    {"Q6_K", GgmlType::kQ6_K, &KQuantKernels::q6_k, &PackedKQuantKernels::q6_k},
};

// n_rows random rows of type t: random bytes, with the fp16 scales set to finite values of
// either sign (d) and positive (dmin) between about 1e-3 and 1e-1.
std::vector<uint8_t> RandomRows(GgmlType t, int64_t n_rows, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mag(1e-3f, 1e-1f);
  const size_t row_bytes = GgmlRowBytes(t, n);
  std::vector<uint8_t> rows(row_bytes * n_rows);
  for (uint8_t& b : rows) b = static_cast<uint8_t>(byte(rng));
  const int64_t nb = n / kQK_K;
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* blk = rows.data() + r * row_bytes + i * (row_bytes / nb);
      const uint16_t d = Fp32ToFp16(byte(rng) < 128 ? mag(rng) : -mag(rng));
      const uint16_t dmin = Fp32ToFp16(mag(rng));
      if (t == GgmlType::kQ6_K) {
        std::memcpy(blk + offsetof(BlockQ6_K, d), &d, 2);
      } else {
        std::memcpy(blk, &d, 2);
        std::memcpy(blk + 2, &dmin, 2);
      }
    }
  }
  return rows;
}

// n_tok Q8_K activation rows of n values (gaussian, a few outliers).
std::vector<uint8_t> Activations(int n_tok, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(n);
  std::vector<uint8_t> acts(Q8KRowBytes(n) * n_tok);
  for (int t = 0; t < n_tok; ++t) {
    for (float& v : x) v = gauss(rng);
    x[(t * 37) % n] *= 9.0f;
    ScalarKQuantKernels().quantize_q8k(x.data(), acts.data() + t * Q8KRowBytes(n), n);
  }
  return acts;
}

struct Set {
  const PackedKQuantKernels* k;
  bool runs;
  std::string why;
};

std::vector<Set> AllSets() {
  const bool avx2 = CpuRunsAvx2Fma16c();
  return {
      {&ScalarPackedKQuantKernels(), true, ""},
      {Avx2PackedKQuantKernels(), avx2, "this CPU has no AVX2 + FMA + F16C"},
      {AvxVnniPackedKQuantKernels(), CpuRunsAvxVnni(), "this CPU has no AVX-VNNI"},
      {Avx512VnniPackedKQuantKernels(), CpuRunsAvx512Vnni(),
       "this CPU has no AVX-512 F/BW/VL/VNNI"},
      {PackedKQuantKernelsFor(KernelSet::kNeon), CpuRunsNeon(), "this CPU has no NEON"},
  };
}

TEST(PackedKLayout, SizesAreEightFileBlocksPerGroup) {
  for (const Format& f : kFormats) {
    EXPECT_TRUE(HasPackedKLayout(f.type)) << f.name;
    EXPECT_EQ(PackedKGroupBytes(f.type, 4096), 8 * static_cast<int64_t>(GgmlRowBytes(f.type, 4096)))
        << f.name;
    EXPECT_EQ(PackedKBytes(f.type, 9, 512), 2 * PackedKGroupBytes(f.type, 512)) << f.name;
    EXPECT_EQ(PackedKBytes(f.type, 8, 512), PackedKGroupBytes(f.type, 512)) << f.name;
  }
  EXPECT_FALSE(HasPackedKLayout(GgmlType::kQ4_0));
}

TEST(PackedKLayout, UnpackGivesTheFileRowsAndPaddingIsZero) {
  for (const Format& f : kFormats) {
    for (int64_t n_rows : {1, 7, 8, 9, 24}) {
      const int64_t n = 512;
      const std::vector<uint8_t> rows = RandomRows(f.type, n_rows, n, 11 + n_rows);
      const size_t row_bytes = GgmlRowBytes(f.type, n);
      std::vector<uint8_t> packed(PackedKBytes(f.type, n_rows, n), 0xab);
      PackKRows(f.type, rows.data(), row_bytes, n_rows, n, packed.data());
      std::vector<uint8_t> back(rows.size(), 0);
      UnpackKRows(f.type, packed.data(), n_rows, n, back.data(), row_bytes);
      EXPECT_EQ(back, rows) << f.name << " rows " << n_rows;
      // The padded rows of the last group unpack to zero blocks.
      const int64_t padded = (n_rows + 7) / 8 * 8;
      std::vector<uint8_t> all(row_bytes * padded, 0xcd);
      UnpackKRows(f.type, packed.data(), padded, n, all.data(), row_bytes);
      for (size_t i = rows.size(); i < all.size(); ++i) {
        ASSERT_EQ(all[i], 0) << f.name << " rows " << n_rows << " byte " << i;
      }
      // Every packed byte is one of the file's (a permutation plus zero padding): the byte sums
      // agree.
      uint64_t sum_rows = 0, sum_packed = 0;
      for (uint8_t b : rows) sum_rows += b;
      for (uint8_t b : packed) sum_packed += b;
      EXPECT_EQ(sum_rows, sum_packed) << f.name;
    }
  }
}

// quants_packed.h's entry points (what MatMul and the loader call) take the K-quants.
TEST(PackedKLayout, QuantsPackedEntryPointsTakeTheKQuants) {
  for (const Format& f : kFormats) {
    const int64_t n_rows = 9, n = 512;
    EXPECT_TRUE(HasPackedLayout(f.type)) << f.name;
    EXPECT_EQ(PackedGroupBytes(f.type, n), PackedKGroupBytes(f.type, n)) << f.name;
    EXPECT_EQ(PackedBytes(f.type, n_rows, n), PackedKBytes(f.type, n_rows, n)) << f.name;
    const std::vector<uint8_t> rows = RandomRows(f.type, n_rows, n, 3);
    const size_t row_bytes = GgmlRowBytes(f.type, n);
    std::vector<uint8_t> mine(PackedKBytes(f.type, n_rows, n)), theirs(mine.size(), 0xee);
    PackKRows(f.type, rows.data(), row_bytes, n_rows, n, mine.data());
    PackRows(f.type, rows.data(), row_bytes, n_rows, n, theirs.data());
    EXPECT_EQ(mine, theirs) << f.name;
    std::vector<uint8_t> row(row_bytes);
    for (int64_t r = 0; r < n_rows; ++r) {
      UnpackRow(f.type, theirs.data(), r, n, row.data());
      EXPECT_EQ(0, std::memcmp(row.data(), rows.data() + r * row_bytes, row_bytes))
          << f.name << " row " << r;
    }
  }
}

uint32_t Bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

// Every set's packed kernel against the scalar row kernel on the file rows, pair by pair.
void CheckSet(const Set& set) {
  constexpr float kSentinel = -12345.5f;
  const int64_t kSizes[] = {256, 512, 4096 + 256};
  const int64_t kRowCounts[] = {1, 7, 8, 9, 24};
  // 64 and 70: several token chunks (the avx2 set's Q5_K / Q6_K prefill path takes 30 tokens
  // a chunk) ending in a narrower register block.
  constexpr int kMaxTok = 70;
  const int kTokens[] = {1, 2, 3, 5, 8, 13, 64, kMaxTok};
  for (const Format& f : kFormats) {
    for (int64_t n : kSizes) {
      const std::vector<uint8_t> acts = Activations(kMaxTok, n, 5 + static_cast<uint32_t>(n));
      const int64_t act_row_bytes = Q8KRowBytes(n);
      for (int64_t n_rows : kRowCounts) {
        if (n > 512 && n_rows == 7) continue;  // 1, 8, 9, 24 cover the long rows
        const std::vector<uint8_t> rows =
            RandomRows(f.type, n_rows, n, static_cast<uint32_t>(n * 31 + n_rows));
        const size_t row_bytes = GgmlRowBytes(f.type, n);
        std::vector<uint8_t> packed(PackedKBytes(f.type, n_rows, n));
        PackKRows(f.type, rows.data(), row_bytes, n_rows, n, packed.data());
        // The reference: every row against all kMaxTok tokens (batch invariance makes it the
        // value for any n_tok).
        std::vector<float> ref(kMaxTok * n_rows);
        for (int64_t r = 0; r < n_rows; ++r) {
          (ScalarKQuantKernels().*f.row)(rows.data() + r * row_bytes, acts.data(), act_row_bytes,
                                         kMaxTok, n, ref.data() + r, n_rows);
        }
        bool nonzero = false;
        for (float v : ref) nonzero |= v != 0.0f;
        ASSERT_TRUE(nonzero) << f.name;
        for (int n_tok : kTokens) {
          if (n > 512 && n_tok != 1 && n_tok != 13 && n_tok != kMaxTok) continue;
          const int64_t stride = n_rows + 3;
          std::vector<float> y(stride * (n_tok + 1), kSentinel);
          (set.k->*f.packed)(packed.data(), n_rows, acts.data(), act_row_bytes, n_tok, n, y.data(),
                             stride);
          for (int t = 0; t <= n_tok; ++t) {
            for (int64_t r = 0; r < stride; ++r) {
              const float got = y[t * stride + r];
              if (t < n_tok && r < n_rows) {
                ASSERT_EQ(Bits(got), Bits(ref[t * n_rows + r]))
                    << set.k->name << " " << f.name << " n " << n << " rows " << n_rows
                    << " tokens " << n_tok << " at row " << r << " token " << t << ": " << got
                    << " vs " << ref[t * n_rows + r];
              } else {
                ASSERT_EQ(Bits(got), Bits(kSentinel))
                    << set.k->name << " " << f.name << " wrote y outside the pairs at row " << r
                    << " token " << t;
              }
            }
          }
        }
      }
    }
  }
}

class PackedKKernels : public ::testing::TestWithParam<int> {};

TEST_P(PackedKKernels, BitForBitTheRowKernels) {
  const Set set = AllSets()[GetParam()];
  if (set.k == nullptr) GTEST_SKIP() << "this build has no such set (another architecture)";
  if (!set.runs) GTEST_SKIP() << set.k->name << ": " << set.why;
  CheckSet(set);
}

std::string SetName(const ::testing::TestParamInfo<int>& info) {
  static const char* const kNames[] = {"scalar", "avx2", "avxvnni", "avx512vnni", "neon"};
  return kNames[info.param];
}

INSTANTIATE_TEST_SUITE_P(Sets, PackedKKernels, ::testing::Range(0, 5), SetName);

// The largest integer sums the formats allow: every code at its maximum (Q4_K 15, Q5_K 31, Q6_K
// 63), the largest scales and mins (Q6_K: -128 and 127), activations all -127 or almost all
// +127 (the kernels' narrow partial sums must not overflow), every set bit for bit the row kernel,
// at 2 tokens and at 8 (more than a register block: the avx2 set's decode-once prefill path).
TEST_P(PackedKKernels, ExtremeCodesScalesAndActivations) {
  const Set set = AllSets()[GetParam()];
  if (set.k == nullptr) GTEST_SKIP() << "this build has no such set (another architecture)";
  if (!set.runs) GTEST_SKIP() << set.k->name << ": " << set.why;
  const int64_t n = 512, n_rows = 9;
  const int n_tok = 8;
  std::vector<float> x(n * n_tok, 1.0f);                // even tokens: all -127
  for (int t = 1; t < n_tok; t += 2) x[t * n] = -1.0f;  // odd tokens: -127 then +127
  std::vector<uint8_t> acts(Q8KRowBytes(n) * n_tok);
  for (int t = 0; t < n_tok; ++t) {
    ScalarKQuantKernels().quantize_q8k(x.data() + t * n, acts.data() + t * Q8KRowBytes(n), n);
  }
  for (const Format& f : kFormats) {
    for (const uint8_t fill : {uint8_t{0xff}, uint8_t{0x80}, uint8_t{0x7f}}) {
      const size_t row_bytes = GgmlRowBytes(f.type, n);
      std::vector<uint8_t> rows(row_bytes * n_rows, 0xff);
      for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t i = 0; i < n / kQK_K; ++i) {
          uint8_t* blk = rows.data() + r * row_bytes + i * (row_bytes / (n / kQK_K));
          const uint16_t d = Fp32ToFp16(0.01f), dmin = Fp32ToFp16(0.02f);
          if (f.type == GgmlType::kQ6_K) {
            std::memset(blk + offsetof(BlockQ6_K, scales), fill, 16);
            std::memcpy(blk + offsetof(BlockQ6_K, d), &d, 2);
          } else {
            std::memset(blk + 4, fill, kKScaleBytes);
            std::memcpy(blk, &d, 2);
            std::memcpy(blk + 2, &dmin, 2);
          }
        }
      }
      std::vector<uint8_t> packed(PackedKBytes(f.type, n_rows, n));
      PackKRows(f.type, rows.data(), row_bytes, n_rows, n, packed.data());
      std::vector<float> ref(n_tok * n_rows), y(n_tok * n_rows);
      for (int64_t r = 0; r < n_rows; ++r) {
        (ScalarKQuantKernels().*f.row)(rows.data() + r * row_bytes, acts.data(), Q8KRowBytes(n),
                                       n_tok, n, ref.data() + r, n_rows);
      }
      for (const int tokens : {2, n_tok}) {
        (set.k->*f.packed)(packed.data(), n_rows, acts.data(), Q8KRowBytes(n), tokens, n, y.data(),
                           n_rows);
        for (size_t i = 0; i < static_cast<size_t>(tokens * n_rows); ++i) {
          ASSERT_EQ(Bits(y[i]), Bits(ref[i]))
              << set.k->name << " " << f.name << " fill " << int{fill} << " tokens " << tokens
              << " at " << i << ": " << y[i] << " vs " << ref[i];
        }
      }
    }
  }
}

TEST(PackedKKernelsFor, TheSetsOfTheirKernelSets) {
  EXPECT_EQ(PackedKQuantKernelsFor(KernelSet::kScalar), &ScalarPackedKQuantKernels());
#if defined(__aarch64__)
  EXPECT_EQ(PackedKQuantKernelsFor(KernelSet::kNeon), NeonPackedKQuantKernels());
#else
  EXPECT_EQ(PackedKQuantKernelsFor(KernelSet::kNeon), nullptr);
#endif
  EXPECT_EQ(PackedKQuantKernelsFor(KernelSet::kAvx2), Avx2PackedKQuantKernels());
  EXPECT_EQ(PackedKQuantKernelsFor(KernelSet::kAvxVnni), AvxVnniPackedKQuantKernels());
  EXPECT_EQ(PackedKQuantKernelsFor(KernelSet::kAvx512Vnni), Avx512VnniPackedKQuantKernels());
  const PackedKQuantKernels& s = ScalarPackedKQuantKernels();
  EXPECT_EQ(PackedKDot(s, GgmlType::kQ4_K), s.q4_k);
  EXPECT_EQ(PackedKDot(s, GgmlType::kQ5_K), s.q5_k);
  EXPECT_EQ(PackedKDot(s, GgmlType::kQ6_K), s.q6_k);
  EXPECT_EQ(PackedKDot(s, GgmlType::kQ4_0), nullptr);
}

}  // namespace
}  // namespace pinfer::quants
