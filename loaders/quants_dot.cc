// Fused dot products of quantized rows against float vectors: each block is unpacked into
// registers, converted to float and multiplied into x with FMA (no scratch buffer). Without
// AVX2 + FMA at build time the same functions fall back to dequantize-then-dot.
#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define PINFER_QUANTS_AVX2 1
#include "loaders/quants_simd.h"
#endif

namespace pinfer {

float DotF32(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  float sum = 0.0f;
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
  sum = quants::simd::HorizontalSum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
#endif
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

namespace quants {

#if PINFER_QUANTS_AVX2
using namespace simd;

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

// Runs step(i, acc) over blocks 0..nb-1 alternating two accumulators, so consecutive blocks
// do not wait on each other's FMA latency.
template <typename Step>
float Accumulate2(int64_t nb, Step step) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    a0 = step(i, a0);
    a1 = step(i + 1, a1);
  }
  if (i < nb) a0 = step(i, a0);
  return HorizontalSum(_mm256_add_ps(a0, a1));
}

inline __m256 Fp16Splat(uint16_t h) { return _mm256_set1_ps(Fp16ToFp32(h)); }

float DotQ8_0(const BlockQ8_0* b, const float* x, int64_t nb) {
  return Accumulate2(nb, [&](int64_t i, __m256 acc) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs));
    return _mm256_fmadd_ps(Fp16Splat(b[i].d), Dot32(q, x + kQK8_0 * i), acc);
  });
}

float DotQ4_0(const BlockQ4_0* b, const float* x, int64_t nb) {
  const __m256i eight = _mm256_set1_epi8(8);
  return Accumulate2(nb, [&](int64_t i, __m256 acc) {
    const __m256i q = _mm256_sub_epi8(Nibbles16(b[i].qs), eight);
    return _mm256_fmadd_ps(Fp16Splat(b[i].d), Dot32(q, x + kQK4_0 * i), acc);
  });
}

float DotQ4_1(const BlockQ4_1* b, const float* x, int64_t nb) {
  return Accumulate2(nb, [&](int64_t i, __m256 acc) {
    const float* xb = x + kQK4_1 * i;
    const __m256 mx = _mm256_mul_ps(Fp16Splat(b[i].m), Sum32(xb));
    return _mm256_add_ps(_mm256_fmadd_ps(Fp16Splat(b[i].d), Dot32(Nibbles16(b[i].qs), xb), mx),
                         acc);
  });
}

float DotQ5_0(const BlockQ5_0* b, const float* x, int64_t nb) {
  const __m256i sixteen = _mm256_set1_epi8(16);
  return Accumulate2(nb, [&](int64_t i, __m256 acc) {
    const __m256i q =
        _mm256_sub_epi8(_mm256_or_si256(Nibbles16(b[i].qs), FifthBits(b[i].qh)), sixteen);
    return _mm256_fmadd_ps(Fp16Splat(b[i].d), Dot32(q, x + kQK5_0 * i), acc);
  });
}

float DotQ5_1(const BlockQ5_1* b, const float* x, int64_t nb) {
  return Accumulate2(nb, [&](int64_t i, __m256 acc) {
    const float* xb = x + kQK5_1 * i;
    const __m256i q = _mm256_or_si256(Nibbles16(b[i].qs), FifthBits(b[i].qh));
    const __m256 mx = _mm256_mul_ps(Fp16Splat(b[i].m), Sum32(xb));
    return _mm256_add_ps(_mm256_fmadd_ps(Fp16Splat(b[i].d), Dot32(q, xb), mx), acc);
  });
}

// Q4_K / Q5_K: per sub-block, d*sc * sum(q*x) - dmin*m * sum(x). The scaled and the offset
// parts of the two sub-blocks of a chunk go to four separate accumulators.
template <typename Block, bool kHighBit>
float DotQK(const Block* b, const float* x, int64_t nb) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, off[2] = {acc[0], acc[0]};
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(b[i].d), dmin = Fp16ToFp32(b[i].dmin);
    [[maybe_unused]] __m256i hbits;
    const __m256i* hp = nullptr;
    if constexpr (kHighBit) {
      hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qh));
      hp = &hbits;
    }
    for (int c = 0; c < 4; ++c, x += 64) {
      __m256i q[2];
      UnpackKChunk(b[i].qs, hp, c, q);
      for (int s = 0; s < 2; ++s) {
        int sc, m;
        UnpackKScaleMin(b[i].scales, 2 * c + s, &sc, &m);
        acc[s] = _mm256_fmadd_ps(_mm256_set1_ps(d * sc), Dot32(q[s], x + 32 * s), acc[s]);
        off[s] = _mm256_fmadd_ps(_mm256_set1_ps(dmin * m), Sum32(x + 32 * s), off[s]);
      }
    }
  }
  return HorizontalSum(_mm256_sub_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(off[0], off[1])));
}

float DotQ4_K(const BlockQ4_K* b, const float* x, int64_t nb) {
  return DotQK<BlockQ4_K, false>(b, x, nb);
}
float DotQ5_K(const BlockQ5_K* b, const float* x, int64_t nb) {
  return DotQK<BlockQ5_K, true>(b, x, nb);
}

// Q6_K: one accumulator per 32-value group of a half block (four independent chains).
float DotQ6_K(const BlockQ6_K* b, const float* x, int64_t nb) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int h = 0; h < 2; ++h, x += 128) {
      __m256i q[4];
      UnpackQ6KHalf(b[i], h, q);
      const int8_t* sc = b[i].scales + 8 * h;
      for (int k = 0; k < 4; ++k) {
        const __m256 lo = Dot16(_mm256_castsi256_si128(q[k]), x + 32 * k, _mm256_setzero_ps());
        const __m256 hi =
            Dot16(_mm256_extracti128_si256(q[k], 1), x + 32 * k + 16, _mm256_setzero_ps());
        acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[2 * k]), lo, acc[k]);
        acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[2 * k + 1]), hi, acc[k]);
      }
    }
  }
  return HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
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
float DotQ5_0(const BlockQ5_0* b, const float* x, int64_t nb) {
  return DotViaDequant<BlockQ5_0, DequantQ5_0, kQK5_0>(b, x, nb);
}
float DotQ5_1(const BlockQ5_1* b, const float* x, int64_t nb) {
  return DotViaDequant<BlockQ5_1, DequantQ5_1, kQK5_1>(b, x, nb);
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
