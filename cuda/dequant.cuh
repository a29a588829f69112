// Device-side dequantization of GGUF blocks, 8 consecutive values at a time, matching
// loaders/quants.cc bit for bit (same formulas, same float operations).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels.h"

namespace pinfer::cuda {

__device__ __forceinline__ float Half(const uint8_t* p) {
  const uint16_t bits = static_cast<uint16_t>(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(bits));
}

// get_scale_min_k4 of llama.cpp: 6-bit scale and min of sub-block j (0..7).
__device__ __forceinline__ void ScaleMinK4(int j, const uint8_t* q, float* sc, float* m) {
  if (j < 4) {
    *sc = static_cast<float>(q[j] & 63);
    *m = static_cast<float>(q[j + 4] & 63);
  } else {
    *sc = static_cast<float>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<float>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The block formats' 8-value decoders: values [i0, i0 + 8) of a row (i0 % 8 == 0) -> v[8].
__device__ __forceinline__ void Dequant8Q4_0(const uint8_t* row, int64_t i0, float v[8]) {
  const uint8_t* b = row + (i0 / 32) * 18;
  const float d = Half(b);
  const int j0 = static_cast<int>(i0 % 32);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int j = j0 + k;
    const int q = j < 16 ? (b[2 + j] & 0xF) : (b[2 + j - 16] >> 4);
    v[k] = static_cast<float>(q - 8) * d;
  }
}

__device__ __forceinline__ void Dequant8Q4_1(const uint8_t* row, int64_t i0, float v[8]) {
  const uint8_t* b = row + (i0 / 32) * 20;
  const float d = Half(b), m = Half(b + 2);
  const int j0 = static_cast<int>(i0 % 32);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int j = j0 + k;
    const int q = j < 16 ? (b[4 + j] & 0xF) : (b[4 + j - 16] >> 4);
    v[k] = static_cast<float>(q) * d + m;
  }
}

// Q5_0 (has_min false) and Q5_1.
__device__ __forceinline__ void Dequant8Q5(bool has_min, const uint8_t* row, int64_t i0,
                                           float v[8]) {
  const int bytes = has_min ? 24 : 22;
  const uint8_t* b = row + (i0 / 32) * bytes;
  const float d = Half(b), m = has_min ? Half(b + 2) : 0.0f;
  const uint8_t* qh = b + (has_min ? 4 : 2);
  const uint8_t* qs = qh + 4;
  const uint32_t h = qh[0] | (qh[1] << 8) | (qh[2] << 16) | (static_cast<uint32_t>(qh[3]) << 24);
  const int j0 = static_cast<int>(i0 % 32);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int j = j0 + k;
    const int lo = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
    const int q = lo | (((h >> j) & 1) << 4);
    v[k] = has_min ? static_cast<float>(q) * d + m : static_cast<float>(q - 16) * d;
  }
}

__device__ __forceinline__ void Dequant8Q8_0(const uint8_t* row, int64_t i0, float v[8]) {
  const uint8_t* b = row + (i0 / 32) * 34;
  const float d = Half(b);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2) + i0 % 32;
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = static_cast<float>(qs[k]) * d;
}

// Q4_K (five false) and Q5_K.
__device__ __forceinline__ void Dequant8Q45_K(bool five, const uint8_t* row, int64_t i0,
                                              float v[8]) {
  const uint8_t* b = row + (i0 / 256) * (five ? 176 : 144);
  const float d = Half(b), dmin = Half(b + 2);
  const int r = static_cast<int>(i0 % 256);
  const int sub = r / 32, l0 = r % 32;
  float sc, m;
  ScaleMinK4(sub, b + 4, &sc, &m);
  const float d1 = d * sc, m1 = dmin * m;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (five ? 48 : 16) + 32 * (sub / 2);
  const int shift = (sub & 1) * 4;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    int q = (qs[l0 + k] >> shift) & 0xF;
    if (five) q += ((qh[l0 + k] >> sub) & 1) << 4;
    v[k] = d1 * static_cast<float>(q) - m1;
  }
}

__device__ __forceinline__ void Dequant8Q6_K(const uint8_t* row, int64_t i0, float v[8]) {
  const uint8_t* b = row + (i0 / 256) * 210;
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = Half(b + 208);
  const int r = static_cast<int>(i0 % 256);
  const int n = r / 128, quarter = (r % 128) / 32, l0 = r % 32;
  const uint8_t* qlp = ql + n * 64 + (quarter & 1) * 32;
  const int lshift = quarter >= 2 ? 4 : 0;
  const uint8_t* qhp = qh + n * 32;
  const int hshift = 2 * quarter;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int l = l0 + k;
    const int q = (((qlp[l] >> lshift) & 0xF) | (((qhp[l] >> hshift) & 3) << 4)) - 32;
    const float sc = static_cast<float>(scales[n * 8 + l / 16 + 2 * quarter]);
    v[k] = d * sc * static_cast<float>(q);
  }
}

// Values [8g, 8g + 8) of a row of `type` (a block type: cols % 8 == 0) -> v[8].
__device__ __forceinline__ void Dequant8(int type, const uint8_t* row, int64_t g, float v[8]) {
  const int64_t i0 = g * 8;
  switch (type) {
    case kWQ4_0:
      return Dequant8Q4_0(row, i0, v);
    case kWQ4_1:
      return Dequant8Q4_1(row, i0, v);
    case kWQ5_0:
    case kWQ5_1:
      return Dequant8Q5(type == kWQ5_1, row, i0, v);
    case kWQ8_0:
      return Dequant8Q8_0(row, i0, v);
    case kWQ4_K:
    case kWQ5_K:
      return Dequant8Q45_K(type == kWQ5_K, row, i0, v);
    case kWQ6_K:
      return Dequant8Q6_K(row, i0, v);
    default:
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = 0.0f;
      return;
  }
}

// One value of a float-type row (F32, F16, BF16).
__device__ __forceinline__ float LoadFloatType(int type, const uint8_t* row, int64_t i) {
  if (type == kWF32) return reinterpret_cast<const float*>(row)[i];
  const uint16_t bits = reinterpret_cast<const uint16_t*>(row)[i];
  if (type == kWF16) return __half2float(__ushort_as_half(bits));
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

__device__ __forceinline__ bool IsFloatType(int type) {
  return type == kWF32 || type == kWF16 || type == kWBF16;
}

}  // namespace pinfer::cuda
