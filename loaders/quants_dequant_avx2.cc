// The avx2 set's row dequantization: the decoders of quants_decode.h with their groups stored.
// The scalar kernels in quants_legacy.cc / quants_k.cc give the same floats (up to the sign of
// a zero Q4_0 weight): d * q is exact in float for every format, so the fused multiply-subtract
// here and the scalar multiply then subtract round once, at the same place.
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

// Everything below is compiled for AVX2 + FMA + F16C (see quants_simd.h).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "loaders/quants_decode.h"
#include "loaders/quants_simd.h"

namespace pinfer::quants::avx2 {
namespace {
using namespace simd;

void F16(const uint16_t* h, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  }
  for (; i < n; ++i) y[i] = HalfToFloat(h[i]);
}

}  // namespace

bool DequantizeFast(GgmlType t, const void* src, float* dst, int64_t n) {
  if (t == GgmlType::kF16) {
    F16(static_cast<const uint16_t*>(src), dst, n);
    return true;
  }
  auto store = [&dst](__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
    _mm256_storeu_ps(dst, v0);
    _mm256_storeu_ps(dst + 8, v1);
    _mm256_storeu_ps(dst + 16, v2);
    _mm256_storeu_ps(dst + 24, v3);
    dst += 32;
  };
  return DecodeBlocks(t, src, n, store);
}

}  // namespace pinfer::quants::avx2

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

#endif  // x86-64
