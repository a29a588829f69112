// Round-trip quality, scale rules, zero handling and DotRow accuracy of the block formats.
#include "loaders/quants.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/fp16.h"

namespace pinfer {
namespace {

const GgmlType kAll[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                         GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                         GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

std::string Name(GgmlType t) { return std::string(GgmlTypeInfoOf(t).name); }

enum class Dist { kGauss, kUniform, kOutliers, kShifted };

// n values from a seeded distribution, none of them zero.
std::vector<float> Sample(Dist dist, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float x = 0;
    switch (dist) {
      case Dist::kGauss:
        x = 0.02f * gauss(rng);
        break;  // typical weight magnitude
      case Dist::kUniform:
        x = uni(rng);
        break;
      case Dist::kOutliers:
        x = gauss(rng) * (i % 97 == 0 ? 8.0f : 1.0f);
        break;
      case Dist::kShifted:
        x = 2.0f + 0.5f * gauss(rng);
        break;
    }
    v[i] = x == 0.0f ? 1e-3f : x;
  }
  return v;
}

std::vector<float> RoundTrip(GgmlType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(GgmlRowBytes(t, n));
  QuantizeRow(t, x.data(), q.data(), n);
  std::vector<float> y(x.size());
  DequantizeRow(t, q.data(), y.data(), n);
  return y;
}

double RelRms(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

// Relative RMS error bounds of quantize -> dequantize (rms(err) / rms(x)) for the Gaussian,
// uniform and shifted samples. Measured worst cases: F16 2.2e-4, BF16 1.7e-3, Q8_0 0.54%,
// Q6_K 1.8%, Q5_0 4.3%, Q5_1 3.8%, Q5_K 3.6%, Q4_0 8.6%, Q4_1 7.8%, Q4_K 7.2%. The sample with
// 8-sigma outliers in some blocks (they stretch those blocks' scales) gets 1.25x the bound
// (measured: Q8_0 0.70%, Q6_K 2.3%, Q5_0 5.6%, Q4_0 11.4%, Q4_K 8.1%).
double RmsBound(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return 0.0;
    case GgmlType::kF16:
      return 3e-4;  // half: 11-bit significand
    case GgmlType::kBF16:
      return 3e-3;  // 8-bit significand
    case GgmlType::kQ8_0:
      return 0.01;
    case GgmlType::kQ6_K:
      return 0.02;
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ5_K:
      return 0.05;
    default:
      return 0.10;  // Q4_0, Q4_1, Q4_K
  }
}

TEST(Quants, RoundTripWithinBounds) {
  const int64_t n = 8 * 256;  // 8 super-blocks, 64 legacy blocks
  for (GgmlType t : kAll) {
    for (Dist dist : {Dist::kGauss, Dist::kUniform, Dist::kOutliers, Dist::kShifted}) {
      const std::vector<float> x = Sample(dist, n, 17 + static_cast<uint32_t>(dist));
      const double rel = RelRms(x, RoundTrip(t, x));
      const double bound = RmsBound(t) * (dist == Dist::kOutliers ? 1.25 : 1.0);
      EXPECT_LE(rel, bound) << Name(t) << " dist " << static_cast<int>(dist);
      std::printf("%-5s dist %d rel rms %.5f\n", Name(t).c_str(), static_cast<int>(dist), rel);
    }
  }
}

TEST(Quants, F16AndBf16Exactness) {
  // Every finite half value survives F16 round trip bit-exactly; bfloat16 values survive BF16.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;  // inf / NaN
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    uint16_t back;
    QuantizeRow(GgmlType::kF16, &f, &back, 1);
    ASSERT_EQ(back, h);
    const float g = Bf16ToFp32(static_cast<uint16_t>(h));
    QuantizeRow(GgmlType::kBF16, &g, &back, 1);
    if ((h & 0x7f80) != 0x7f80) {
      ASSERT_EQ(back, h);
    }
  }
  // Rounding is to nearest: error at most half an ulp.
  const std::vector<float> x = Sample(Dist::kUniform, 4096, 5);
  const std::vector<float> f16 = RoundTrip(GgmlType::kF16, x), bf16 = RoundTrip(GgmlType::kBF16, x);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::fabs(x[i]) >= 6.2e-5f) {
      EXPECT_LE(std::fabs(f16[i] - x[i]), std::ldexp(std::fabs(x[i]), -11));
    }
    EXPECT_LE(std::fabs(bf16[i] - x[i]), std::ldexp(std::fabs(x[i]), -8));
  }
}

TEST(Quants, AllZeroRowsQuantizeToZeros) {
  for (GgmlType t : kAll) {
    const int64_t n = 512;
    std::vector<float> x(n, 0.0f);
    const std::vector<float> y = RoundTrip(t, x);
    for (float v : y) {
      ASSERT_FALSE(std::isnan(v)) << Name(t);
      ASSERT_EQ(v, 0.0f) << Name(t);
    }
  }
}

TEST(Quants, ConstantBlocks) {
  // A block of equal values: every format reproduces it closely and without NaN.
  for (GgmlType t : kAll) {
    for (float c : {0.7f, -3.0f}) {
      std::vector<float> x(256, c);
      const std::vector<float> y = RoundTrip(t, x);
      for (float v : y) {
        ASSERT_FALSE(std::isnan(v)) << Name(t);
        EXPECT_NEAR(v, c, 0.02 * std::fabs(c)) << Name(t);
      }
    }
  }
}

TEST(Quants, LegacyScaleRules) {
  std::vector<float> x = Sample(Dist::kUniform, 32, 9);
  x[5] = -4.0f;  // largest magnitude, negative
  BlockQ4_0 q4;
  QuantizeRow(GgmlType::kQ4_0, x.data(), &q4, 32);
  EXPECT_EQ(Fp16ToFp32(q4.d), 0.5f);  // d = max / -8
  EXPECT_EQ(q4.qs[5] & 0x0f, 0);      // the extreme value takes code 0
  BlockQ5_0 q5;
  QuantizeRow(GgmlType::kQ5_0, x.data(), &q5, 32);
  EXPECT_EQ(Fp16ToFp32(q5.d), 0.25f);  // d = max / -16
  BlockQ8_0 q8;
  QuantizeRow(GgmlType::kQ8_0, x.data(), &q8, 32);
  EXPECT_EQ(Fp16ToFp32(q8.d), Fp16ToFp32(Fp32ToFp16(4.0f / 127)));  // d = amax / 127
  EXPECT_EQ(q8.qs[5], -127);
  BlockQ4_1 q41;
  QuantizeRow(GgmlType::kQ4_1, x.data(), &q41, 32);
  float lo = x[0], hi = x[0];
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_EQ(Fp16ToFp32(q41.m), Fp16ToFp32(Fp32ToFp16(lo)));              // m = min
  EXPECT_EQ(Fp16ToFp32(q41.d), Fp16ToFp32(Fp32ToFp16((hi - lo) / 15)));  // d = (max-min)/15
}

// DotRow against the double-precision dot of the dequantized row. The bound is relative to
// sum_i |w_i x_i| (the dot's condition scale): |DotRow - ref| <= 1e-5 * sum |w_i x_i|. For
// data without cancellation (the "aligned" case) that sum equals |ref|, so there it is a
// plain relative error <= 1e-5. (Measured worst over 50 seeded 4096-value rows: 3.5e-8 of
// sum |w_i x_i| for Q5_K, about 1e-8 for the rest.)
void CheckDot(GgmlType t, int64_t n, Dist wd, bool aligned, uint32_t seed) {
  std::vector<float> w = Sample(wd, n, seed);
  std::vector<float> x = Sample(Dist::kGauss, n, seed + 1000);
  std::vector<uint8_t> q(GgmlRowBytes(t, n));
  QuantizeRow(t, w.data(), q.data(), n);
  std::vector<float> deq(n);
  DequantizeRow(t, q.data(), deq.data(), n);
  if (aligned) {
    for (int64_t i = 0; i < n; ++i) x[i] = std::copysign(std::fabs(x[i]) + 0.01f, deq[i]);
  }
  double ref = 0, l1 = 0;
  for (int64_t i = 0; i < n; ++i) {
    ref += double(deq[i]) * x[i];
    l1 += std::fabs(double(deq[i]) * x[i]);
  }
  const float got = DotRow(t, q.data(), x.data(), n);
  EXPECT_LE(std::fabs(got - ref), 1e-5 * l1) << Name(t) << " n=" << n << " ref=" << ref;
}

TEST(Quants, DotRowMatchesDequantizedDoubleDot) {
  for (GgmlType t : kAll) {
    const int64_t bs = GgmlTypeInfoOf(t).block_size;
    const int64_t one = bs == 1 ? 32 : bs;
    for (int64_t n : {one, 4096 / one * one, int64_t{16 * 256} + (bs == 1 ? 13 : 0)}) {
      for (Dist wd : {Dist::kGauss, Dist::kOutliers, Dist::kShifted}) {
        CheckDot(t, n, wd, false, 3 + static_cast<uint32_t>(n));
        CheckDot(t, n, wd, true, 5 + static_cast<uint32_t>(n));
      }
    }
  }
}

TEST(Quants, DotF32MatchesDouble) {
  for (int64_t n : {1, 7, 8, 31, 33, 4096, 4099}) {
    const std::vector<float> a = Sample(Dist::kUniform, n, 1), b = Sample(Dist::kUniform, n, 2);
    double ref = 0, l1 = 0;
    for (int64_t i = 0; i < n; ++i)
      ref += double(a[i]) * b[i], l1 += std::fabs(double(a[i]) * b[i]);
    EXPECT_LE(std::fabs(DotF32(a.data(), b.data(), n) - ref), 1e-6 * l1) << n;
  }
}

TEST(Quants, UnsupportedTypesAreInert) {
  float y[256];
  std::fill(y, y + 256, 1.0f);
  uint8_t raw[292] = {};
  DequantizeRow(GgmlType::kQ8_K, raw, y, 256);
  for (float v : y) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(DotRow(GgmlType::kQ2_K, raw, y, 256), 0.0f);
}

}  // namespace
}  // namespace pinfer
