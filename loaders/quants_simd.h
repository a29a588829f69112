// AVX2 building blocks of the block decoders and the dot products (internal to loaders/;
// include only in the avx2 set's files, after their `#pragma GCC target("avx2,fma,f16c")` and
// after this file's own includes, which must be compiled for the build's baseline). Everything
// here is in an anonymous namespace: each file gets its own copies, so the linker can never
// hand an AVX2 copy of an inline function to code that runs on a CPU without AVX2.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "loaders/quants_internal.h"

namespace pinfer::quants::simd {
namespace {

// IEEE half to float with F16C (the same value as Fp16ToFp32: the conversion is exact).
inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// a * b + c with one rounding (std::fma's value, as one instruction).
inline float FmaScalar(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// Signed bytes 0..7 and 8..15 of v as two vectors of 8 floats.
inline __m256 I8Lo(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }
inline __m256 I8Hi(__m128i v) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
}

// DotF32's reduction of its four accumulators to the sum before the scalar tail.
inline float FinishDot(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
  return HorizontalSum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

// 16 packed nibble bytes -> 32 bytes: low nibbles in lanes 0..15, high nibbles in 16..31
// (the order of the 32-value formats).
inline __m256i Nibbles16(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

// The 32 fifth bits of Q5_0 / Q5_1 (bit k of the little-endian qh word) as 0x10 in byte k.
inline __m256i FifthBits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i mask = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// Codes of chunk c (values 64c..64c+63) of a Q4_K / Q5_K block: q[0] the 32 values of
// sub-block 2c, q[1] those of 2c+1; hbits is the block's qh (Q5_K) or null (Q4_K).
inline void UnpackKChunk(const uint8_t* qs, const __m256i* hbits, int c, __m256i q[2]) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
  q[0] = _mm256_and_si256(v, low4);
  q[1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
  if (hbits != nullptr) {  // bits 2c and 2c+1 of each qh byte, moved to bit 4
    const __m256i bit = _mm256_set1_epi8(1);
    const __m256i h = _mm256_srli_epi16(*hbits, 2 * c);
    q[0] = _mm256_or_si256(q[0], _mm256_slli_epi16(_mm256_and_si256(h, bit), 4));
    q[1] =
        _mm256_or_si256(q[1], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 1), bit), 4));
  }
}

// Signed codes (q - 32) of half h of a Q6_K block: q[k] holds values 128h + 32k .. +31,
// i.e. sub-blocks 8h + 2k (lanes 0..15) and 8h + 2k + 1 (lanes 16..31).
inline void UnpackQ6KHalf(const BlockQ6_K& b, int h, __m256i q[4]) {
  const __m256i low4 = _mm256_set1_epi8(0x0f), two_bits = _mm256_set1_epi8(0x30);
  const __m256i bias = _mm256_set1_epi8(32);
  const auto* ql = reinterpret_cast<const __m256i*>(b.ql + 64 * h);
  const __m256i a = _mm256_loadu_si256(ql), c = _mm256_loadu_si256(ql + 1);
  const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
  // qh bit pairs 0-1, 2-3, 4-5, 6-7 give bits 4-5 of the four groups.
  q[0] = _mm256_or_si256(_mm256_and_si256(a, low4),
                         _mm256_and_si256(_mm256_slli_epi16(hb, 4), two_bits));
  q[1] = _mm256_or_si256(_mm256_and_si256(c, low4),
                         _mm256_and_si256(_mm256_slli_epi16(hb, 2), two_bits));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4),
                         _mm256_and_si256(hb, two_bits));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), low4),
                         _mm256_and_si256(_mm256_srli_epi16(hb, 2), two_bits));
  for (int k = 0; k < 4; ++k) q[k] = _mm256_sub_epi8(q[k], bias);
}

}  // namespace
}  // namespace pinfer::quants::simd
