// The 32-value block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): scalar dequantization and the
// reference round-to-nearest quantizers, choosing scales as llama.cpp's *_ref functions do.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

namespace pinfer::quants {
namespace {

// Largest-magnitude value of x[0..n), with its sign.
float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

void MinMax(const float* x, int n, float* lo, float* hi) {
  *lo = FLT_MAX;
  *hi = -FLT_MAX;
  for (int i = 0; i < n; ++i) {
    *lo = std::min(*lo, x[i]);
    *hi = std::max(*hi, x[i]);
  }
}

// 5th bits of the 32 values as the little-endian word stored in qh.
uint32_t LoadQh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

void StoreQh(uint8_t* qh, uint32_t v) { std::memcpy(qh, &v, 4); }

}  // namespace

void DequantQ4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
    const float d = Fp16ToFp32(b[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = d * ((b[i].qs[j] & 0x0f) - 8);
      y[j + 16] = d * ((b[i].qs[j] >> 4) - 8);
    }
  }
}

void DequantQ4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4_1) {
    const float d = Fp16ToFp32(b[i].d), m = Fp16ToFp32(b[i].m);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      y[j] = d * (b[i].qs[j] & 0x0f) + m;
      y[j + 16] = d * (b[i].qs[j] >> 4) + m;
    }
  }
}

void DequantQ5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK5_0) {
    const float d = Fp16ToFp32(b[i].d);
    const uint32_t qh = LoadQh(b[i].qh);
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const int lo = (b[i].qs[j] & 0x0f) | (((qh >> j) & 1) << 4);
      const int hi = (b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = d * (lo - 16);
      y[j + 16] = d * (hi - 16);
    }
  }
}

void DequantQ5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK5_1) {
    const float d = Fp16ToFp32(b[i].d), m = Fp16ToFp32(b[i].m);
    const uint32_t qh = LoadQh(b[i].qh);
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const int lo = (b[i].qs[j] & 0x0f) | (((qh >> j) & 1) << 4);
      const int hi = (b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = d * lo + m;
      y[j + 16] = d * hi + m;
    }
  }
}

void DequantQ8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK8_0) {
    const float d = Fp16ToFp32(b[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[j] = d * b[i].qs[j];
  }
}

// Q4_0: the largest-magnitude value maps to code 0 (d = max / -8), so the sign of the
// extreme value gets the extra level of the asymmetric range -8..7.
void QuantQ4_0(const float* x, BlockQ4_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK4_0) {
    const float d = SignedAbsMax(x, kQK4_0) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = Fp32ToFp16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int hi = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
      b[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// Q4_1: codes span [min, max] in 15 steps.
void QuantQ4_1(const float* x, BlockQ4_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK4_1) {
    float lo, hi;
    MinMax(x, kQK4_1, &lo, &hi);
    const float d = (hi - lo) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = Fp32ToFp16(d);
    b[i].m = Fp32ToFp16(lo);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[j] - lo) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[j + 16] - lo) * id + 0.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// Q5_0: as Q4_0 with 32 levels, d = max / -16.
void QuantQ5_0(const float* x, BlockQ5_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK5_0) {
    const float d = SignedAbsMax(x, kQK5_0) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = Fp32ToFp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const int q0 = std::min(31, static_cast<int>(x[j] * id + 16.5f));
      const int q1 = std::min(31, static_cast<int>(x[j + 16] * id + 16.5f));
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
    }
    StoreQh(b[i].qh, qh);
  }
}

// Q5_1: codes span [min, max] in 31 steps.
void QuantQ5_1(const float* x, BlockQ5_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK5_1) {
    float lo, hi;
    MinMax(x, kQK5_1, &lo, &hi);
    const float d = (hi - lo) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = Fp32ToFp16(d);
    b[i].m = Fp32ToFp16(lo);
    uint32_t qh = 0;
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const int q0 = std::min(31, static_cast<int>((x[j] - lo) * id + 0.5f));
      const int q1 = std::min(31, static_cast<int>((x[j + 16] - lo) * id + 0.5f));
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
    }
    StoreQh(b[i].qh, qh);
  }
}

// Q8_0: symmetric, d = amax / 127, codes rounded half away from zero.
void QuantQ8_0(const float* x, BlockQ8_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = Fp32ToFp16(d);
    for (int j = 0; j < kQK8_0; ++j) b[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

}  // namespace pinfer::quants
