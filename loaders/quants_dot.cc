// Dot products of rows against float vectors. DotF32 fixes the numerics; every other format's
// DotRow is DotF32 of the dequantized row, bit for bit: with AVX2 the quantized formats are
// decoded into registers by the same code that dequantizes them (quants_decode.h) and multiplied
// into x in DotF32's order, with no scratch buffer; F16 and BF16 convert in DotF32's loop.
// Without AVX2 + FMA at build time every format dequantizes a block at a time and continues
// DotF32's single running sum over it.
#include <algorithm>
#include <cmath>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define PINFER_QUANTS_AVX2 1
#include "loaders/quants_decode.h"
#endif

namespace pinfer {
namespace quants {

#if PINFER_QUANTS_AVX2
using namespace simd;

namespace {

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
  for (; i < n; ++i) sum = std::fma(a1(i), b[i], sum);
  return sum;
}

}  // namespace

float DotF16(const uint16_t* w, const float* x, int64_t n) {
  return DotPieces(
      [w](int64_t k) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k)));
      },
      [w](int64_t k) { return Fp16ToFp32(w[k]); }, x, n);
}

float DotBF16(const uint16_t* w, const float* x, int64_t n) {
  return DotPieces(
      [w](int64_t k) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
      },
      [w](int64_t k) { return Bf16ToFp32(w[k]); }, x, n);
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

#else  // no AVX2: one running sum, in value order.

// Out of line so that every caller adds with the same instructions.
[[gnu::noinline]] float SumProducts(const float* a, const float* b, int64_t n, float sum) {
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

namespace {

// Dequantizes a block (or 256 plain values) at a time and carries the sum across them.
float DotViaDequantize(GgmlType t, const void* row, const float* x, int64_t n) {
  const int64_t block = GgmlTypeInfoOf(t).block_size;
  const int64_t chunk = block > 1 ? block : 256;
  float buf[256], sum = 0.0f;
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t len = std::min(chunk, n - i);
    DequantizeRow(t, static_cast<const uint8_t*>(row) + GgmlRowBytes(t, i), buf, len);
    sum = SumProducts(buf, x + i, len, sum);
  }
  return sum;
}

}  // namespace

float DotF16(const uint16_t* w, const float* x, int64_t n) {
  return DotViaDequantize(GgmlType::kF16, w, x, n);
}
float DotBF16(const uint16_t* w, const float* x, int64_t n) {
  return DotViaDequantize(GgmlType::kBF16, w, x, n);
}
float DotBlocks(GgmlType t, const void* row, const float* x, int64_t n) {
  if (!GgmlTypeInfoOf(t).supported || GgmlTypeInfoOf(t).block_size == 1) return 0.0f;
  return DotViaDequantize(t, row, x, n);
}

#endif

}  // namespace quants

float DotF32(const float* a, const float* b, int64_t n) {
#if PINFER_QUANTS_AVX2
  return quants::DotPieces([a](int64_t k) { return _mm256_loadu_ps(a + k); },
                           [a](int64_t k) { return a[k]; }, b, n);
#else
  return quants::SumProducts(a, b, n, 0.0f);
#endif
}

}  // namespace pinfer
