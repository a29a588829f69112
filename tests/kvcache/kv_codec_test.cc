// Round trips and sub-range decoding of every KV format.
#include "kvcache/kv_codec.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pinfer {
namespace {

std::vector<float> RandomRow(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) {
    v = dist(rng);
    if (v == 0) v = 0.25f;
  }
  return x;
}

std::vector<float> RoundTrip(KvDtype d, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> row(*KvRowBytes(d, n));
  KvEncodeRow(d, x.data(), row.data(), n);
  std::vector<float> y(x.size());
  KvDecodeRange(d, row.data(), n, 0, n, y.data());
  return y;
}

// Error bound relative to the row's (or 32-block's) largest magnitude, per format:
// f32 exact; f16 2^-11; bf16 2^-8; q8_0 half a step of amax/127 (+ fp16 scale rounding);
// q4_0 half a step of amax/8 at most one full step at the clamped edge; fp8 3 mantissa bits
// (relative 2^-4 per value) plus subnormal steps of 2^-9 x scale.
double Bound(KvDtype d) {
  switch (d) {
    case KvDtype::kF32:
      return 0.0;
    case KvDtype::kF16:
      return 1.0 / 2048;
    case KvDtype::kBF16:
      return 1.0 / 256;
    case KvDtype::kQ8_0:
      return 0.5 / 127 + 1.0 / 1024;
    case KvDtype::kQ4_0:
      return 1.0 / 8 + 1.0 / 1024;
    case KvDtype::kFp8E4M3:
      return 1.0 / 16;
  }
  return 0;
}

TEST(KvCodec, RoundTripWithinBound) {
  for (KvDtype d : kAllKvDtypes) {
    for (uint32_t seed = 1; seed <= 20; ++seed) {
      const int64_t n = 32 * (1 + seed % 8);
      const std::vector<float> x = RandomRow(n, seed);
      const std::vector<float> y = RoundTrip(d, x);
      const bool block = d == KvDtype::kQ8_0 || d == KvDtype::kQ4_0;
      for (int64_t i = 0; i < n; ++i) {
        // Reference magnitude: the value itself for element formats, the block's amax for
        // block formats and the row's amax/448 scale step for fp8's subnormals.
        double ref = std::fabs(x[i]);
        if (block) {
          ref = 0;
          for (int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j)
            ref = std::max(ref, (double)std::fabs(x[j]));
        }
        double tol = Bound(d) * ref;
        if (d == KvDtype::kFp8E4M3) {
          double amax = 0;
          for (float v : x) amax = std::max(amax, (double)std::fabs(v));
          tol += amax / 448 / 512;  // half of the subnormal step 2^-9
        }
        ASSERT_LE(std::fabs((double)y[i] - x[i]), tol)
            << KvDtypeName(d) << " seed " << seed << " i " << i << " x " << x[i];
      }
    }
  }
}

TEST(KvCodec, SubRangeEqualsFullDecodeSlice) {
  for (KvDtype d : kAllKvDtypes) {
    const int64_t n = 128;
    const std::vector<float> x = RandomRow(n, 7);
    std::vector<uint8_t> row(*KvRowBytes(d, n));
    KvEncodeRow(d, x.data(), row.data(), n);
    std::vector<float> full(n);
    KvDecodeRange(d, row.data(), n, 0, n, full.data());
    for (int64_t begin : {0, 1, 8, 16, 31, 32, 40, 100}) {
      for (int64_t count : {1, 8, 16, 24, 28}) {
        if (begin + count > n) continue;
        std::vector<float> part(static_cast<size_t>(count));
        KvDecodeRange(d, row.data(), n, begin, count, part.data());
        for (int64_t i = 0; i < count; ++i) {
          ASSERT_EQ(part[i], full[begin + i]) << KvDtypeName(d) << " " << begin << "+" << i;
        }
      }
    }
  }
}

TEST(KvCodec, ZeroRowsDecodeToZero) {
  for (KvDtype d : kAllKvDtypes) {
    const std::vector<float> x(64, 0.0f);
    for (float v : RoundTrip(d, x)) ASSERT_EQ(v, 0.0f) << KvDtypeName(d);
  }
}

TEST(KvCodec, Fp8UsesFullRangeAndSaturates) {
  // The row maximum maps to e4m3's 448 (code 0x7e), so it comes back exactly (up to scale
  // rounding) and no code is NaN.
  std::vector<float> x = {1000.0f, -1000.0f, 500.0f, 1e-3f, 0.0f, -3.0f, 999.99f, 0.1f};
  std::vector<uint8_t> row(*KvRowBytes(KvDtype::kFp8E4M3, 8));
  KvEncodeRow(KvDtype::kFp8E4M3, x.data(), row.data(), 8);
  EXPECT_EQ(row[4], 0x7e);
  EXPECT_EQ(row[5], 0xfe);
  for (size_t i = 4; i < row.size(); ++i) EXPECT_NE(row[i] & 0x7f, 0x7f) << "NaN code at " << i;
  std::vector<float> y(8);
  KvDecodeRange(KvDtype::kFp8E4M3, row.data(), 8, 0, 8, y.data());
  EXPECT_FLOAT_EQ(y[0], 1000.0f);
  EXPECT_FLOAT_EQ(y[1], -1000.0f);
  EXPECT_FLOAT_EQ(y[6], 1000.0f);  // 999.99 rounds up to the top code, never past it
  EXPECT_EQ(y[4], 0.0f);
  // Exactly representable ratios survive: 500/1000*448 = 224 = 1.75 x 2^7.
  EXPECT_FLOAT_EQ(y[2], 500.0f);
}

TEST(KvCodec, Fp8RoundsToNearestEven) {
  // With amax 448 the scale is 1, so inputs are e4m3 values directly. Between 16 (code
  // 0x58) and 18 (0x59) the midpoint 17 rounds to the even code, 16; 19 (between 18 and 20)
  // rounds to 20 (0x5a, even).
  std::vector<float> x = {448.0f, 17.0f, 19.0f, 17.01f, 0.001953125f * 1.5f};
  std::vector<uint8_t> row(*KvRowBytes(KvDtype::kFp8E4M3, 5));
  KvEncodeRow(KvDtype::kFp8E4M3, x.data(), row.data(), 5);
  std::vector<float> y(5);
  KvDecodeRange(KvDtype::kFp8E4M3, row.data(), 5, 0, 5, y.data());
  EXPECT_EQ(y[1], 16.0f);
  EXPECT_EQ(y[2], 20.0f);
  EXPECT_EQ(y[3], 18.0f);
  EXPECT_EQ(y[4], 0.001953125f * 2);  // 1.5 subnormal steps -> 2 steps (even)
}

TEST(KvCodec, BlockScalesFollowGguf) {
  // q8_0: d = amax/127 so the largest value is exactly +-127 steps; q4_0: d = max/-8 so the
  // signed maximum maps to q = 0 (value -8 d = max).
  std::vector<float> x(32, 0.5f);
  x[3] = -2.0f;
  const std::vector<float> y8 = RoundTrip(KvDtype::kQ8_0, x);
  EXPECT_NEAR(y8[3], -2.0f, 1e-3);
  const std::vector<float> y4 = RoundTrip(KvDtype::kQ4_0, x);
  EXPECT_NEAR(y4[3], -2.0f, 1e-3);
}

TEST(KvCodec, BlockFormatsRejectRowsNotMultipleOf32) {
  const auto r = KvRowBytes(KvDtype::kQ8_0, 40);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("40"), std::string::npos);
  EXPECT_FALSE(KvRowBytes(KvDtype::kQ4_0, 8).ok());
  EXPECT_TRUE(KvRowBytes(KvDtype::kFp8E4M3, 40).ok());
}

}  // namespace
}  // namespace pinfer
