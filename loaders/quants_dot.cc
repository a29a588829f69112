// Fused dot products of quantized rows against float vectors: each block is unpacked into
// registers, converted to float and multiplied into x with FMA (no scratch buffer). Without
// AVX2 + FMA at build time the same functions fall back to dequantize-then-dot.
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define PINFER_QUANTS_AVX2 1
#include <immintrin.h>
#endif

namespace pinfer {

#if PINFER_QUANTS_AVX2
namespace {

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Signed bytes 0..7 and 8..15 of v as two vectors of 8 floats.
inline __m256 I8Lo(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }
inline __m256 I8Hi(__m128i v) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
}

// sum over 16 values: bytes of q (signed) times x[0..16).
inline __m256 Dot16(__m128i q, const float* x, __m256 acc) {
  acc = _mm256_fmadd_ps(I8Lo(q), _mm256_loadu_ps(x), acc);
  return _mm256_fmadd_ps(I8Hi(q), _mm256_loadu_ps(x + 8), acc);
}

// sum over 32 values: bytes of q (signed) times x[0..32).
inline __m256 Dot32(__m256i q, const float* x) {
  __m256 acc = _mm256_mul_ps(I8Lo(_mm256_castsi256_si128(q)), _mm256_loadu_ps(x));
  acc = _mm256_fmadd_ps(I8Hi(_mm256_castsi256_si128(q)), _mm256_loadu_ps(x + 8), acc);
  return Dot16(_mm256_extracti128_si256(q, 1), x + 16, acc);
}

inline __m256 Sum32(const float* x) {
  const __m256 a = _mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8));
  const __m256 b = _mm256_add_ps(_mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24));
  return _mm256_add_ps(a, b);
}

// 16 packed nibble bytes -> 32 bytes: low nibbles in lanes 0..15, high nibbles in 16..31.
inline __m256i Nibbles16(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

}  // namespace
#endif

float DotF32(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  float tail = 0.0f;
#if PINFER_QUANTS_AVX2
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8)
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  tail = HorizontalSum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
#endif
  for (; i < n; ++i) tail += a[i] * b[i];
  return tail;
}

namespace quants {

#if PINFER_QUANTS_AVX2

float DotF16(const uint16_t* w, const float* x, int64_t n) {
  int64_t i = 0;
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  auto h8 = [&](int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k)));
  };
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(h8(i), _mm256_loadu_ps(x + i), s0);
    s1 = _mm256_fmadd_ps(h8(i + 8), _mm256_loadu_ps(x + i + 8), s1);
    s2 = _mm256_fmadd_ps(h8(i + 16), _mm256_loadu_ps(x + i + 16), s2);
    s3 = _mm256_fmadd_ps(h8(i + 24), _mm256_loadu_ps(x + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(h8(i), _mm256_loadu_ps(x + i), s0);
  float sum = HorizontalSum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) sum += Fp16ToFp32(w[i]) * x[i];
  return sum;
}

float DotBF16(const uint16_t* w, const float* x, int64_t n) {
  int64_t i = 0;
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;
  auto b8 = [&](int64_t k) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  };
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(b8(i), _mm256_loadu_ps(x + i), s0);
    s1 = _mm256_fmadd_ps(b8(i + 8), _mm256_loadu_ps(x + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(b8(i), _mm256_loadu_ps(x + i), s0);
  float sum = HorizontalSum(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) sum += Bf16ToFp32(w[i]) * x[i];
  return sum;
}

float DotQ8_0(const BlockQ8_0* b, const float* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(Fp16ToFp32(b[i].d)), Dot32(q, x), acc);
  }
  return HorizontalSum(acc);
}

float DotQ4_0(const BlockQ4_0* b, const float* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i eight = _mm256_set1_epi8(8);
  for (int64_t i = 0; i < nb; ++i, x += kQK4_0) {
    const __m256i q = _mm256_sub_epi8(Nibbles16(b[i].qs), eight);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(Fp16ToFp32(b[i].d)), Dot32(q, x), acc);
  }
  return HorizontalSum(acc);
}

float DotQ4_1(const BlockQ4_1* b, const float* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, x += kQK4_1) {
    const __m256 qx = Dot32(Nibbles16(b[i].qs), x);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(Fp16ToFp32(b[i].d)), qx, acc);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(Fp16ToFp32(b[i].m)), Sum32(x), acc);
  }
  return HorizontalSum(acc);
}

// Q4_K / Q5_K: per sub-block, d*sc * sum(q*x) - dmin*m * sum(x).
template <typename Block, bool kHighBit>
float DotQK(const Block* b, const float* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(b[i].d), dmin = Fp16ToFp32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    [[maybe_unused]] __m256i hbits;
    if constexpr (kHighBit) hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qh));
    for (int c = 0; c < 4; ++c, q += 32, x += 64) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
      __m256i q0 = _mm256_and_si256(v, low4);
      __m256i q1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      if constexpr (kHighBit) {
        // Bits 2c and 2c+1 of each qh byte, moved to bit 4 of the value.
        const __m256i h = _mm256_srli_epi16(hbits, 2 * c);
        const __m256i bit = _mm256_set1_epi8(1);
        q0 = _mm256_or_si256(q0, _mm256_slli_epi16(_mm256_and_si256(h, bit), 4));
        q1 = _mm256_or_si256(q1,
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 1), bit), 4));
      }
      int sc0, m0, sc1, m1;
      UnpackKScaleMin(b[i].scales, 2 * c, &sc0, &m0);
      UnpackKScaleMin(b[i].scales, 2 * c + 1, &sc1, &m1);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc0), Dot32(q0, x), acc);
      acc = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * m0), Sum32(x), acc);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc1), Dot32(q1, x + 32), acc);
      acc = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * m1), Sum32(x + 32), acc);
    }
  }
  return HorizontalSum(acc);
}

float DotQ4_K(const BlockQ4_K* b, const float* x, int64_t nb) {
  return DotQK<BlockQ4_K, false>(b, x, nb);
}
float DotQ5_K(const BlockQ5_K* b, const float* x, int64_t nb) {
  return DotQK<BlockQ5_K, true>(b, x, nb);
}

float DotQ6_K(const BlockQ6_K* b, const float* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0f), two_bits = _mm256_set1_epi8(0x30);
  const __m256i bias = _mm256_set1_epi8(32);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int h = 0; h < 2; ++h, x += 128) {
      const auto* ql = reinterpret_cast<const __m256i*>(b[i].ql + 64 * h);
      const __m256i a = _mm256_loadu_si256(ql), c = _mm256_loadu_si256(ql + 1);
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qh + 32 * h));
      // Values 0..31, 32..63, 64..95, 96..127 of this half; qh bit pairs 0-1, 2-3, 4-5, 6-7.
      __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(a, low4),
                          _mm256_and_si256(_mm256_slli_epi16(hb, 4), two_bits)),
          _mm256_or_si256(_mm256_and_si256(c, low4),
                          _mm256_and_si256(_mm256_slli_epi16(hb, 2), two_bits)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4),
                          _mm256_and_si256(hb, two_bits)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), low4),
                          _mm256_and_si256(_mm256_srli_epi16(hb, 2), two_bits)),
      };
      const int8_t* sc = b[i].scales + 8 * h;
      for (int k = 0; k < 4; ++k) {
        const __m256i s = _mm256_sub_epi8(q[k], bias);
        const __m256 lo = Dot16(_mm256_castsi256_si128(s), x + 32 * k, _mm256_setzero_ps());
        const __m256 hi =
            Dot16(_mm256_extracti128_si256(s, 1), x + 32 * k + 16, _mm256_setzero_ps());
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[2 * k]), lo, acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[2 * k + 1]), hi, acc);
      }
    }
  }
  return HorizontalSum(acc);
}

#else  // no AVX2: dequantize a block at a time and take plain dot products.

namespace {
template <typename Block, void (*Dequant)(const Block*, float*, int64_t), int kN>
float DotViaDequant(const Block* b, const float* x, int64_t nb) {
  float buf[kN], sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i, x += kN) {
    Dequant(b + i, buf, 1);
    sum += DotF32(buf, x, kN);
  }
  return sum;
}
}  // namespace

float DotF16(const uint16_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += Fp16ToFp32(w[i]) * x[i];
  return sum;
}
float DotBF16(const uint16_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += Bf16ToFp32(w[i]) * x[i];
  return sum;
}
float DotQ8_0(const BlockQ8_0* b, const float* x, int64_t nb) {
  return DotViaDequant<BlockQ8_0, DequantQ8_0, kQK8_0>(b, x, nb);
}
float DotQ4_0(const BlockQ4_0* b, const float* x, int64_t nb) {
  return DotViaDequant<BlockQ4_0, DequantQ4_0, kQK4_0>(b, x, nb);
}
float DotQ4_1(const BlockQ4_1* b, const float* x, int64_t nb) {
  return DotViaDequant<BlockQ4_1, DequantQ4_1, kQK4_1>(b, x, nb);
}
float DotQ4_K(const BlockQ4_K* b, const float* x, int64_t nb) {
  return DotViaDequant<BlockQ4_K, DequantQ4_K, kQK_K>(b, x, nb);
}
float DotQ5_K(const BlockQ5_K* b, const float* x, int64_t nb) {
  return DotViaDequant<BlockQ5_K, DequantQ5_K, kQK_K>(b, x, nb);
}
float DotQ6_K(const BlockQ6_K* b, const float* x, int64_t nb) {
  return DotViaDequant<BlockQ6_K, DequantQ6_K, kQK_K>(b, x, nb);
}

#endif

}  // namespace quants
}  // namespace pinfer
