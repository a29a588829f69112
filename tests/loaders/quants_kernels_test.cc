// The vector kernels against the scalar ones on arbitrary block bytes: every code, every
// 6-bit scale/min pattern and every high-bit combination the random bytes reach must
// dequantize as the scalar reference does, and DotRow must match the double-precision dot.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/fp16.h"
#include "loaders/quants.h"
#include "loaders/quants_internal.h"

namespace pinfer {
namespace {

// Random bytes for nb blocks, with each fp16 field set to a finite value of moderate size.
template <typename Block>
std::vector<Block> RandomBlocks(int64_t nb, uint32_t seed, std::vector<size_t> fp16_offsets) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  std::vector<Block> blocks(static_cast<size_t>(nb));
  auto* raw = reinterpret_cast<uint8_t*>(blocks.data());
  for (size_t i = 0; i < blocks.size() * sizeof(Block); ++i)
    raw[i] = static_cast<uint8_t>(byte(rng));
  for (Block& b : blocks) {
    for (size_t off : fp16_offsets) {
      const uint16_t h = Fp32ToFp16(scale(rng));
      std::memcpy(reinterpret_cast<uint8_t*>(&b) + off, &h, 2);
    }
  }
  return blocks;
}

template <typename Block>
void Check(GgmlType t, int block_values, std::vector<size_t> fp16_offsets,
           void (*scalar)(const Block*, float*, int64_t)) {
  for (int64_t nb : {int64_t{1}, int64_t{3}, int64_t{4096 / block_values}}) {
    const int64_t n = nb * block_values;
    const std::vector<Block> blocks =
        RandomBlocks<Block>(nb, 11 + static_cast<uint32_t>(nb), fp16_offsets);
    std::vector<float> want(n), got(n);
    scalar(blocks.data(), want.data(), nb);
    DequantizeRow(t, blocks.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      // One rounding apart at most (a fused multiply-add against a multiply then add).
      ASSERT_NEAR(got[i], want[i], 4e-7 * (std::fabs(want[i]) + 1e-3))
          << GgmlTypeInfoOf(t).name << " value " << i;
    }
    std::mt19937 rng(3);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::vector<float> x(n);
    for (float& v : x) v = gauss(rng);
    double ref = 0, l1 = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref += double(want[i]) * x[i];
      l1 += std::fabs(double(want[i]) * x[i]);
    }
    // Same bound as quants_test: |DotRow - ref| <= 1e-5 * sum |w_i x_i|.
    EXPECT_LE(std::fabs(DotRow(t, blocks.data(), x.data(), n) - ref), 1e-5 * l1)
        << GgmlTypeInfoOf(t).name << " blocks " << nb;
  }
}

TEST(QuantsKernels, VectorMatchesScalarOnRandomBytes) {
  using namespace quants;
  Check<BlockQ4_0>(GgmlType::kQ4_0, kQK4_0, {offsetof(BlockQ4_0, d)}, DequantQ4_0);
  Check<BlockQ4_1>(GgmlType::kQ4_1, kQK4_1, {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)},
                   DequantQ4_1);
  Check<BlockQ5_0>(GgmlType::kQ5_0, kQK5_0, {offsetof(BlockQ5_0, d)}, DequantQ5_0);
  Check<BlockQ5_1>(GgmlType::kQ5_1, kQK5_1, {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)},
                   DequantQ5_1);
  Check<BlockQ8_0>(GgmlType::kQ8_0, kQK8_0, {offsetof(BlockQ8_0, d)}, DequantQ8_0);
  Check<BlockQ4_K>(GgmlType::kQ4_K, kQK_K, {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)},
                   DequantQ4_K);
  Check<BlockQ5_K>(GgmlType::kQ5_K, kQK_K, {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)},
                   DequantQ5_K);
  Check<BlockQ6_K>(GgmlType::kQ6_K, kQK_K, {offsetof(BlockQ6_K, d)}, DequantQ6_K);
}

TEST(QuantsKernels, F16AndBf16VectorPathsMatchScalarConversions) {
  std::mt19937 rng(8);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  for (int64_t n : {1, 7, 8, 33, 4096}) {
    std::vector<uint16_t> h(n);
    for (uint16_t& v : h) {
      do v = static_cast<uint16_t>(bits(rng));
      while ((v & 0x7c00) == 0x7c00 || (v & 0x7f80) == 0x7f80);  // finite in both formats
    }
    std::vector<float> got(n);
    DequantizeRow(GgmlType::kF16, h.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], Fp16ToFp32(h[i]));
    DequantizeRow(GgmlType::kBF16, h.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], Bf16ToFp32(h[i]));
  }
}

}  // namespace
}  // namespace pinfer
