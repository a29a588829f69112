// The vector kernels against the scalar ones on arbitrary block bytes: every code, every
// 6-bit scale/min pattern and every high-bit combination the random bytes reach must
// dequantize exactly as the scalar reference does, and DotRow must match the double-precision
// dot. Then the exact contract of loaders/quants.h: DotRow == DotF32(DequantizeRow) and
// DotF32Tile over dot layouts == DotF32, bit for bit, for every type.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/fp16.h"
#include "loaders/kernel_set.h"
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
      // Bit for bit: d * q is exact, so a fused multiply-subtract and a multiply then subtract
      // round at the same place.
      ASSERT_EQ(got[i], want[i]) << GgmlTypeInfoOf(t).name << " value " << i;
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

// A row of type t with n values from random bytes: every fp16 scale/min a finite value of
// moderate size, half and bfloat16 values finite, F32 values Gaussian.
std::vector<uint8_t> RandomRow(GgmlType t, int64_t n, uint32_t seed) {
  std::vector<uint8_t> row(GgmlRowBytes(t, n));
  std::mt19937 rng(seed);
  auto fill = [&](auto blocks) { std::memcpy(row.data(), blocks.data(), row.size()); };
  using namespace quants;
  const int64_t bs = GgmlTypeInfoOf(t).block_size;
  switch (t) {
    case GgmlType::kQ4_0:
      fill(RandomBlocks<BlockQ4_0>(n / bs, seed, {offsetof(BlockQ4_0, d)}));
      break;
    case GgmlType::kQ4_1:
      fill(RandomBlocks<BlockQ4_1>(n / bs, seed, {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)}));
      break;
    case GgmlType::kQ5_0:
      fill(RandomBlocks<BlockQ5_0>(n / bs, seed, {offsetof(BlockQ5_0, d)}));
      break;
    case GgmlType::kQ5_1:
      fill(RandomBlocks<BlockQ5_1>(n / bs, seed, {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)}));
      break;
    case GgmlType::kQ8_0:
      fill(RandomBlocks<BlockQ8_0>(n / bs, seed, {offsetof(BlockQ8_0, d)}));
      break;
    case GgmlType::kQ4_K:
      fill(RandomBlocks<BlockQ4_K>(n / bs, seed,
                                   {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)}));
      break;
    case GgmlType::kQ5_K:
      fill(RandomBlocks<BlockQ5_K>(n / bs, seed,
                                   {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)}));
      break;
    case GgmlType::kQ6_K:
      fill(RandomBlocks<BlockQ6_K>(n / bs, seed, {offsetof(BlockQ6_K, d)}));
      break;
    case GgmlType::kF16:
    case GgmlType::kBF16: {
      std::uniform_real_distribution<float> v(-2.0f, 2.0f);
      for (int64_t i = 0; i < n; ++i) {
        const float f = v(rng);
        const uint16_t h = t == GgmlType::kF16 ? Fp32ToFp16(f) : Fp32ToBf16(f);
        std::memcpy(row.data() + 2 * i, &h, 2);
      }
      break;
    }
    case GgmlType::kF32: {
      std::normal_distribution<float> v(0.0f, 1.0f);
      for (int64_t i = 0; i < n; ++i) {
        const float f = v(rng);
        std::memcpy(row.data() + 4 * i, &f, 4);
      }
      break;
    }
    default:
      ADD_FAILURE() << "no random rows for " << GgmlTypeInfoOf(t).name;
  }
  return row;
}

std::vector<float> Gaussian(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = gauss(rng);
  return x;
}

constexpr GgmlType kExactTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                                    GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ4_K,
                                    GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kF16,
                                    GgmlType::kBF16, GgmlType::kF32};

// Row lengths: 1, 3 and 16 blocks, and for the plain types lengths with a partial 32-value
// group and single values at the end.
std::vector<int64_t> Lengths(GgmlType t) {
  const int64_t bs = GgmlTypeInfoOf(t).block_size;
  if (bs > 1) return {bs, 3 * bs, 16 * bs};
  return {1, 7, 8, 24, 31, 32, 45, 256, 4096 + 13};
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

TEST(QuantsKernels, DotRowIsDotF32OfTheDequantizedRowBitForBit) {
  for (GgmlType t : kExactTypes) {
    for (int64_t n : Lengths(t)) {
      for (uint32_t seed = 1; seed <= 4; ++seed) {
        const std::vector<uint8_t> row = RandomRow(t, n, seed * 7 + static_cast<uint32_t>(n));
        const std::vector<float> x = Gaussian(n, seed);
        std::vector<float> deq(n);
        DequantizeRow(t, row.data(), deq.data(), n);
        const float fused = DotRow(t, row.data(), x.data(), n);
        const float plain = DotF32(deq.data(), x.data(), n);
        ASSERT_TRUE(SameBits(fused, plain)) << GgmlTypeInfoOf(t).name << " n=" << n << " seed "
                                            << seed << ": DotRow " << fused << " DotF32 " << plain;
        ASSERT_NE(fused, 0.0f);
      }
    }
  }
}

TEST(QuantsKernels, DotLayoutsHoldTheDequantizedRow) {
  for (GgmlType t : kExactTypes) {
    for (int64_t n : Lengths(t)) {
      const std::vector<uint8_t> row = RandomRow(t, n, 3 + static_cast<uint32_t>(n));
      std::vector<float> deq(n), want(n), got(n, -1.0f);
      DequantizeRow(t, row.data(), deq.data(), n);
      ToDotLayout(deq.data(), want.data(), n);
      DequantizeRowDotLayout(t, row.data(), got.data(), n);
      ASSERT_EQ(std::memcmp(want.data(), got.data(), n * sizeof(float)), 0)
          << GgmlTypeInfoOf(t).name << " n=" << n;
      std::vector<float> sorted_deq = deq, sorted_layout = got;  // a permutation of the row
      std::sort(sorted_deq.begin(), sorted_deq.end());
      std::sort(sorted_layout.begin(), sorted_layout.end());
      ASSERT_EQ(sorted_deq, sorted_layout) << GgmlTypeInfoOf(t).name << " n=" << n;
    }
  }
}

TEST(QuantsKernels, DotF32TileIsDotRowBitForBit) {
  for (GgmlType t : kExactTypes) {
    for (int64_t n : Lengths(t)) {
      for (int na : {1, 2, 5, 16, 19}) {
        for (int nb : {1, 3, 4, 6, 9}) {
          std::vector<std::vector<uint8_t>> rows;
          std::vector<float> a(na * n), b(nb * n), out(static_cast<size_t>(nb * (na + 1)), 0.0f);
          for (int i = 0; i < na; ++i) {
            rows.push_back(RandomRow(t, n, 100 * i + static_cast<uint32_t>(n + na)));
            DequantizeRowDotLayout(t, rows.back().data(), a.data() + i * n, n);
          }
          const std::vector<float> x = Gaussian(nb * n, 9 + nb);
          for (int j = 0; j < nb; ++j) ToDotLayout(x.data() + j * n, b.data() + j * n, n);
          DotF32Tile(a.data(), n, na, b.data(), n, nb, n, out.data(), na + 1);
          for (int j = 0; j < nb; ++j) {
            for (int i = 0; i < na; ++i) {
              const float want = DotRow(t, rows[i].data(), x.data() + j * n, n);
              ASSERT_TRUE(SameBits(out[j * (na + 1) + i], want))
                  << GgmlTypeInfoOf(t).name << " n=" << n << " row " << i << "/" << na << " vector "
                  << j << "/" << nb << ": " << out[j * (na + 1) + i] << " vs " << want;
            }
            ASSERT_EQ(out[j * (na + 1) + na], 0.0f) << "wrote past the row count";
          }
        }
      }
    }
  }
}

// The tests above check the process's kernel set (PAGEDINFER_KERNELS picks it; CTest runs this
// binary once more with the scalar set forced). This one checks every set this CPU runs, side
// by side: each set dequantizes to the scalar floats, and within each set DotRow is DotF32 of
// the dequantized row and DotF32Tile is DotRow, bit for bit.
TEST(QuantsKernels, EverySetKeepsTheExactContracts) {
  using namespace quants;
  EXPECT_EQ(&ActiveFloatKernels(), &FloatKernelsFor(ActiveKernelSet()));
  for (KernelSet set : kAllKernelSets) {
    if (!KernelSetRuns(set)) continue;
    const FloatKernels& k = FloatKernelsFor(set);
    for (GgmlType t : kExactTypes) {
      for (int64_t n : Lengths(t)) {
        const std::vector<uint8_t> row = RandomRow(t, n, 5 + static_cast<uint32_t>(n));
        const std::vector<float> x = Gaussian(n, 17);
        std::vector<float> deq(n), fast(n);
        DequantizeRowScalar(t, row.data(), deq.data(), n);
        if (k.dequantize_fast(t, row.data(), fast.data(), n)) {
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_TRUE(fast[i] == deq[i]) << KernelSetName(set) << " " << GgmlTypeInfoOf(t).name;
          }
        }
        float dot = 0;
        if (t == GgmlType::kF32) {
          dot = k.dot_f32(reinterpret_cast<const float*>(row.data()), x.data(), n);
        } else if (t == GgmlType::kF16) {
          dot = k.dot_f16(reinterpret_cast<const uint16_t*>(row.data()), x.data(), n);
        } else if (t == GgmlType::kBF16) {
          dot = k.dot_bf16(reinterpret_cast<const uint16_t*>(row.data()), x.data(), n);
        } else {
          dot = k.dot_blocks(t, row.data(), x.data(), n);
        }
        ASSERT_TRUE(SameBits(dot, k.dot_f32(deq.data(), x.data(), n)))
            << KernelSetName(set) << " " << GgmlTypeInfoOf(t).name << " n=" << n;
        std::vector<float> wl(n), xl(n);
        k.dequantize_row_dot_layout(t, row.data(), wl.data(), n);
        k.to_dot_layout(x.data(), xl.data(), n);
        float tiled = 0;
        k.dot_f32_tile(wl.data(), n, 1, xl.data(), n, 1, n, &tiled, 1);
        ASSERT_TRUE(SameBits(tiled, dot))
            << KernelSetName(set) << " " << GgmlTypeInfoOf(t).name << " n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace pinfer
