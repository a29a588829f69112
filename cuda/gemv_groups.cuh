// The decode GEMV's "groups" lane layout (the default; gemv_units.cuh has the other): lane l
// of the warp that owns a weight row takes the row's 8-value groups l, l + 32, l + 64, ...,
// so at every step the warp's 32 lanes read 256 consecutive x values (two 16-byte loads
// each, contiguous across lanes) and 8 consecutive groups of weights. Each group is read
// with 2-byte loads (every GGUF block field is at an even offset) and dequantized with the
// CPU's formulas (loaders/quants_legacy.cc, quants_k.cc). Host-compilable, so that tests run
// a warp's lanes on the CPU (cuda_kernels_test: EveryLoadPathMatchesCpuOnHost).
#pragma once

#include <cstdint>

#include "cuda/gemv_units.cuh"
#include "cuda/kernels.h"

namespace pinfer::cuda::gemv {

// 8 bytes at an even address -> w[2], little-endian, with 2-byte loads.
__host__ __device__ __forceinline__ void Load8Bytes(const uint8_t* p, uint32_t (&w)[2]) {
  const unsigned short* q = reinterpret_cast<const unsigned short*>(p);
  w[0] = static_cast<uint32_t>(Ld(q)) | (static_cast<uint32_t>(Ld(q + 1)) << 16);
  w[1] = static_cast<uint32_t>(Ld(q + 2)) | (static_cast<uint32_t>(Ld(q + 3)) << 16);
}

__host__ __device__ __forceinline__ float HalfAt(const uint8_t* p) {
  return HalfOf(Ld(reinterpret_cast<const unsigned short*>(p)));
}

// Values [8g, 8g + 8) of a row of block type kType -> v.
template <int kType>
__host__ __device__ __forceinline__ void GroupValues8(const uint8_t* row, int64_t g,
                                                      float (&v)[8]) {
  const int64_t i0 = g * 8;
  uint32_t w[2];
  if constexpr (LegacyBlockBytes(kType) > 0) {
    const uint8_t* b = row + (i0 / 32) * LegacyBlockBytes(kType);
    const int j0 = static_cast<int>(i0 % 32);
    const float d = HalfAt(b);
    if constexpr (kType == kWQ8_0) {
      Load8Bytes(b + 2 + j0, w);
      PINFER_UNROLL
      for (int k = 0; k < 8; ++k) v[k] = static_cast<float>(static_cast<int8_t>(ByteOf(w, k))) * d;
    } else {
      constexpr bool kMin = kType == kWQ4_1 || kType == kWQ5_1;
      constexpr bool kFive = kType == kWQ5_0 || kType == kWQ5_1;
      const float m = kMin ? HalfAt(b + 2) : 0.0f;
      const int qh_at = kMin ? 4 : 2, qs_at = qh_at + (kFive ? 4 : 0);
      uint32_t h = 0;
      if constexpr (kFive) {
        uint32_t hw[2];
        Load8Bytes(b + qh_at, hw);  // qh and the first 4 bytes of qs
        h = hw[0];
      }
      Load8Bytes(b + qs_at + j0 % 16, w);
      const int shift = j0 >= 16 ? 4 : 0;
      PINFER_UNROLL
      for (int k = 0; k < 8; ++k) {
        int q = static_cast<int>((ByteOf(w, k) >> shift) & 0xFu);
        if constexpr (kFive) q |= static_cast<int>(((h >> (j0 + k)) & 1u) << 4);
        v[k] = kMin ? static_cast<float>(q) * d + m : static_cast<float>(q - (kFive ? 16 : 8)) * d;
      }
    }
  } else if constexpr (kType == kWQ4_K || kType == kWQ5_K) {
    constexpr bool kFive = kType == kWQ5_K;
    const uint8_t* b = row + (i0 / 256) * (kFive ? 176 : 144);
    const int r = static_cast<int>(i0 % 256);
    const int sub = r / 32, l0 = r % 32;
    const float d = HalfAt(b), dmin = HalfAt(b + 2);
    const uint8_t* s = b + 4;  // 12 bytes of 6-bit scales and mins (get_scale_min_k4)
    float sc, mn;
    if (sub < 4) {
      sc = static_cast<float>(Ld(s + sub) & 63);
      mn = static_cast<float>(Ld(s + sub + 4) & 63);
    } else {
      const int hi = Ld(s + sub + 4);
      sc = static_cast<float>((hi & 0xF) | ((Ld(s + sub - 4) >> 6) << 4));
      mn = static_cast<float>((hi >> 4) | ((Ld(s + sub) >> 6) << 4));
    }
    const float d1 = d * sc, m1 = dmin * mn;
    Load8Bytes(b + (kFive ? 48 : 16) + 32 * (sub / 2) + l0, w);
    uint32_t hw[2] = {0, 0};
    if constexpr (kFive) Load8Bytes(b + 16 + l0, hw);
    const int shift = (sub & 1) * 4;
    PINFER_UNROLL
    for (int k = 0; k < 8; ++k) {
      int q = static_cast<int>((ByteOf(w, k) >> shift) & 0xFu);
      if constexpr (kFive) q += static_cast<int>(((ByteOf(hw, k) >> sub) & 1u) << 4);
      v[k] = d1 * static_cast<float>(q) - m1;
    }
  } else {
    static_assert(kType == kWQ6_K, "a block type");
    const uint8_t* b = row + (i0 / 256) * 210;
    const int r = static_cast<int>(i0 % 256);
    const int n = r / 128, quarter = (r % 128) / 32, l0 = r % 32;
    uint32_t hw[2];
    Load8Bytes(b + n * 64 + (quarter & 1) * 32 + l0, w);  // ql
    Load8Bytes(b + 128 + n * 32 + l0, hw);                // qh
    const float d = HalfAt(b + 208);
    const float sc =
        static_cast<float>(static_cast<int8_t>(Ld(b + 192 + n * 8 + l0 / 16 + 2 * quarter)));
    const int lshift = quarter >= 2 ? 4 : 0, hshift = 2 * quarter;
    PINFER_UNROLL
    for (int k = 0; k < 8; ++k) {
      const int q = static_cast<int>(((ByteOf(w, k) >> lshift) & 0xFu) |
                                     (((ByteOf(hw, k) >> hshift) & 3u) << 4)) -
                    32;
      v[k] = d * sc * static_cast<float>(q);
    }
  }
}

// Lane `lane` of `lanes` adds its groups of one row into acc[t], t < n.
template <int kType, int kMaxT>
__host__ __device__ __forceinline__ void GroupLane(const uint8_t* row, const float* x, int64_t cols,
                                                   int n, int lane, int lanes,
                                                   float (&acc)[kMaxT]) {
  const int64_t groups = cols / 8;
  for (int64_t g = lane; g < groups; g += lanes) {
    float v[8];
    GroupValues8<kType>(row, g, v);
    Fma8(acc, v, x, cols, n, g * 8);
  }
}

}  // namespace pinfer::cuda::gemv
