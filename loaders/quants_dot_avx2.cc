// The avx2 set's dot products and its float kernel table. DotF32 fixes the numerics; every
// other format's DotRow is DotF32 of the dequantized row, bit for bit: the quantized formats
// are decoded into registers by the same code that dequantizes them (quants_decode.h) and
// multiplied into x in DotF32's order, with no scratch buffer; F16 and BF16 convert in
// DotF32's loop.
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

// Everything below is compiled for AVX2 + FMA + F16C (the includes above for the baseline; see
// quants_simd.h).
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

// DotF32's sequence with the first operand read through a8(i) (8 values from i, as floats) and
// a1(i) (value i).
template <typename Load8, typename Load1>
inline float DotPieces(Load8 a8, Load1 a1, const float* b, int64_t n) {
  int64_t i = 0;
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(a8(i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(a8(i + 8), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(a8(i + 16), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(a8(i + 24), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(a8(i), _mm256_loadu_ps(b + i), s0);
  float sum = FinishDot(s0, s1, s2, s3);
  for (; i < n; ++i) sum = FmaScalar(a1(i), b[i], sum);
  return sum;
}

float DotF32(const float* a, const float* b, int64_t n) {
  return DotPieces([a](int64_t k) { return _mm256_loadu_ps(a + k); },
                   [a](int64_t k) { return a[k]; }, b, n);
}

float DotF16(const uint16_t* w, const float* x, int64_t n) {
  return DotPieces(
      [w](int64_t k) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k)));
      },
      [w](int64_t k) { return HalfToFloat(w[k]); }, x, n);
}

float DotBF16(const uint16_t* w, const float* x, int64_t n) {
  return DotPieces(
      [w](int64_t k) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
      },
      [w](int64_t k) {
        const uint32_t bits = static_cast<uint32_t>(w[k]) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
      },
      x, n);
}

// Block rows hold whole 32-value groups, so only DotF32's first loop runs: group g's four
// pieces go to the four accumulators.
float DotBlocks(GgmlType t, const void* row, const float* x, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  auto dot = [&](__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
    s0 = _mm256_fmadd_ps(v0, _mm256_loadu_ps(x), s0);
    s1 = _mm256_fmadd_ps(v1, _mm256_loadu_ps(x + 8), s1);
    s2 = _mm256_fmadd_ps(v2, _mm256_loadu_ps(x + 16), s2);
    s3 = _mm256_fmadd_ps(v3, _mm256_loadu_ps(x + 24), s3);
    x += 32;
  };
  if (!DecodeBlocks(t, row, n, dot)) return 0.0f;
  return FinishDot(s0, s1, s2, s3);
}

constexpr FloatKernels kAvx2 = {
    DequantizeFast,         DotF32,    DotF16, DotBF16, DotBlocks, ToDotLayout,
    DequantizeRowDotLayout, DotF32Tile};

}  // namespace
}  // namespace pinfer::quants::avx2

namespace pinfer::quants {
const FloatKernels* Avx2FloatKernels() { return &avx2::kAvx2; }
}  // namespace pinfer::quants

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

#else  // not x86-64

#include "loaders/quants_internal.h"

namespace pinfer::quants {
const FloatKernels* Avx2FloatKernels() { return nullptr; }
}  // namespace pinfer::quants

#endif
