// Row encoders and decoders of the KV formats (kv_codec.h). The element and block formats
// shared with GGUF (f32, f16, bf16, q8_0, q4_0) are encoded by the loaders' reference
// quantizers (QuantizeRow: llama.cpp's scale choices); fp8 is e4m3 with a float32 per-row
// scale in front of the row (see kv_dtype.h).
#include "kvcache/kv_codec.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants.h"

namespace pinfer {
namespace {

// ---- fp8 e4m3 (OCP "FN" variant: bias 7, no infinities, 0x7f/0xff are NaN and never made).

constexpr uint8_t kE4M3MaxCode = 0x7e;  // 448 = 1.75 x 2^8
constexpr float kE4M3Max = 448.0f;

struct E4M3Table {
  float value[256];
  constexpr E4M3Table() : value() {
    for (int c = 0; c < 256; ++c) {
      const int e = (c >> 3) & 0xf, m = c & 7;
      float v = 0;
      if (e == 0) {
        v = static_cast<float>(m) / 512.0f;  // subnormal: m/8 x 2^-6
      } else {
        float p = 1;
        for (int i = 0; i < e - 7; ++i) p *= 2;
        for (int i = 0; i < 7 - e; ++i) p /= 2;
        v = (1.0f + static_cast<float>(m) / 8.0f) * p;
      }
      value[c] = (c & 0x80) ? -v : v;
    }
  }
};
constexpr E4M3Table kE4M3;

// |x| (finite) -> e4m3 magnitude code, rounding to nearest even, saturating at 448.
uint8_t EncodeE4M3Magnitude(float a) {
  if (!(a < kE4M3Max)) return kE4M3MaxCode;  // saturate (and treat NaN as max)
  if (a < 1.0f / 64.0f) {                    // subnormal range: steps of 2^-9
    // nearbyint rounds half to even; 8 (= 2^-6) is exactly the first normal's code.
    return static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  uint32_t bits;
  std::memcpy(&bits, &a, 4);
  const int e = static_cast<int>(bits >> 23) - 127;  // -6 .. 8
  const uint32_t man = bits & 0x7fffff;
  uint32_t code = (static_cast<uint32_t>(e + 7) << 3) | (man >> 20);
  const uint32_t rem = man & 0xfffff, half = 0x80000;
  if (rem > half || (rem == half && (code & 1))) ++code;  // a carry moves into the exponent
  return static_cast<uint8_t>(std::min<uint32_t>(code, kE4M3MaxCode));
}

void EncodeFp8(const float* src, uint8_t* dst, int64_t n) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
  const float scale = amax / kE4M3Max;
  std::memcpy(dst, &scale, 4);
  uint8_t* q = dst + 4;
  if (scale == 0) {
    std::memset(q, 0, static_cast<size_t>(n));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = src[i] / scale;
    q[i] = static_cast<uint8_t>(EncodeE4M3Magnitude(std::fabs(v)) | (std::signbit(v) ? 0x80 : 0));
  }
}

// Block decoders over values [begin, begin + count) of the row: per block, the scale once,
// then plain loops over the wanted values (which the compiler vectorises).
void DecodeQ8_0(const uint8_t* row, int64_t begin, int64_t count, float* dst) {
  const int64_t end = begin + count;
  for (int64_t i = begin; i < end;) {
    const int64_t b = i / kQK8_0;
    const uint8_t* blk = row + b * static_cast<int64_t>(sizeof(BlockQ8_0));
    uint16_t dh;
    std::memcpy(&dh, blk + offsetof(BlockQ8_0, d), 2);
    const float d = Fp16ToFp32(dh);
    const int8_t* qs = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ8_0, qs));
    const int lo = static_cast<int>(i - b * kQK8_0);
    const int hi = static_cast<int>(std::min<int64_t>(end - b * kQK8_0, kQK8_0));
    for (int j = lo; j < hi; ++j) *dst++ = d * static_cast<float>(qs[j]);
    i = b * kQK8_0 + hi;
  }
}

void DecodeQ4_0(const uint8_t* row, int64_t begin, int64_t count, float* dst) {
  constexpr int kHalf = kQK4_0 / 2;
  const int64_t end = begin + count;
  for (int64_t i = begin; i < end;) {
    const int64_t b = i / kQK4_0;
    const uint8_t* blk = row + b * static_cast<int64_t>(sizeof(BlockQ4_0));
    uint16_t dh;
    std::memcpy(&dh, blk + offsetof(BlockQ4_0, d), 2);
    const float d = Fp16ToFp32(dh);
    const uint8_t* qs = blk + offsetof(BlockQ4_0, qs);
    const int lo = static_cast<int>(i - b * kQK4_0);
    const int hi = static_cast<int>(std::min<int64_t>(end - b * kQK4_0, kQK4_0));
    for (int j = lo; j < std::min(hi, kHalf); ++j) {  // low nibbles: values 0..15
      *dst++ = d * static_cast<float>((qs[j] & 0xf) - 8);
    }
    for (int j = std::max(lo, kHalf); j < hi; ++j) {  // high nibbles: values 16..31
      *dst++ = d * static_cast<float>((qs[j - kHalf] >> 4) - 8);
    }
    i = b * kQK4_0 + hi;
  }
}

void DecodeF16(const uint8_t* src, int64_t count, float* dst) {
  // Plain C++ (the vector attention kernels decode f16 in registers themselves).
  for (int64_t i = 0; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = Fp16ToFp32(h);
  }
}

}  // namespace

void KvEncodeRow(KvDtype d, const float* src, uint8_t* dst, int64_t n) {
  switch (d) {
    case KvDtype::kF32:
      return QuantizeRow(GgmlType::kF32, src, dst, n);
    case KvDtype::kF16:
      return QuantizeRow(GgmlType::kF16, src, dst, n);
    case KvDtype::kBF16:
      return QuantizeRow(GgmlType::kBF16, src, dst, n);
    case KvDtype::kQ8_0:
      return QuantizeRow(GgmlType::kQ8_0, src, dst, n);
    case KvDtype::kQ4_0:
      return QuantizeRow(GgmlType::kQ4_0, src, dst, n);
    case KvDtype::kFp8E4M3:
      return EncodeFp8(src, dst, n);
  }
}

void KvDecodeRange(KvDtype d, const uint8_t* row, int64_t n, int64_t begin, int64_t count,
                   float* dst) {
  (void)n;  // the row's length only matters to formats with a trailer (none yet)
  switch (d) {
    case KvDtype::kF32:
      std::memcpy(dst, row + 4 * begin, static_cast<size_t>(count) * 4);
      return;
    case KvDtype::kF16:
      DecodeF16(row + 2 * begin, count, dst);
      return;
    case KvDtype::kBF16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * (begin + i), 2);
        dst[i] = Bf16ToFp32(h);
      }
      return;
    case KvDtype::kQ8_0:
      DecodeQ8_0(row, begin, count, dst);
      return;
    case KvDtype::kQ4_0:
      DecodeQ4_0(row, begin, count, dst);
      return;
    case KvDtype::kFp8E4M3: {
      float scale;
      std::memcpy(&scale, row, 4);
      const uint8_t* q = row + 4 + begin;
      for (int64_t i = 0; i < count; ++i) dst[i] = kE4M3.value[q[i]] * scale;
      return;
    }
  }
}

}  // namespace pinfer
