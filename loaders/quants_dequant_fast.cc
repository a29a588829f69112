// AVX2 row dequantization. The scalar kernels in quants_legacy.cc / quants_k.cc define the
// results; these agree with them to within one rounding (d * q - o is a single FMA here).
#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define PINFER_DEQUANT_AVX2 1
#include "loaders/quants_simd.h"
#endif

namespace pinfer::quants {

#if PINFER_DEQUANT_AVX2
namespace {
using namespace simd;

template <typename Block>
const Block* As(const void* p) {
  return static_cast<const Block*>(p);
}

void F16(const uint16_t* h, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  }
  for (; i < n; ++i) y[i] = Fp16ToFp32(h[i]);
}

void Q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, y += kQK8_0) {
    Store32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs)),
            _mm256_set1_ps(Fp16ToFp32(b[i].d)), zero, y);
  }
}

void Q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256i eight = _mm256_set1_epi8(8);
  for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
    Store32(_mm256_sub_epi8(Nibbles16(b[i].qs), eight), _mm256_set1_ps(Fp16ToFp32(b[i].d)), zero,
            y);
  }
}

void Q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4_1) {
    Store32(Nibbles16(b[i].qs), _mm256_set1_ps(Fp16ToFp32(b[i].d)),
            _mm256_set1_ps(-Fp16ToFp32(b[i].m)), y);
  }
}

void Q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256i sixteen = _mm256_set1_epi8(16);
  for (int64_t i = 0; i < nb; ++i, y += kQK5_0) {
    const __m256i q =
        _mm256_sub_epi8(_mm256_or_si256(Nibbles16(b[i].qs), FifthBits(b[i].qh)), sixteen);
    Store32(q, _mm256_set1_ps(Fp16ToFp32(b[i].d)), zero, y);
  }
}

void Q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK5_1) {
    const __m256i q = _mm256_or_si256(Nibbles16(b[i].qs), FifthBits(b[i].qh));
    Store32(q, _mm256_set1_ps(Fp16ToFp32(b[i].d)), _mm256_set1_ps(-Fp16ToFp32(b[i].m)), y);
  }
}

template <typename Block, bool kHighBit>
void QK(const Block* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(b[i].d), dmin = Fp16ToFp32(b[i].dmin);
    [[maybe_unused]] __m256i hbits;
    const __m256i* hp = nullptr;
    if constexpr (kHighBit) {
      hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qh));
      hp = &hbits;
    }
    for (int c = 0; c < 4; ++c, y += 64) {
      __m256i q[2];
      UnpackKChunk(b[i].qs, hp, c, q);
      for (int s = 0; s < 2; ++s) {
        int sc, m;
        UnpackKScaleMin(b[i].scales, 2 * c + s, &sc, &m);
        Store32(q[s], _mm256_set1_ps(d * sc), _mm256_set1_ps(dmin * m), y + 32 * s);
      }
    }
  }
}

void Q6_K(const BlockQ6_K* b, float* y, int64_t nb) {
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int h = 0; h < 2; ++h, y += 128) {
      __m256i q[4];
      UnpackQ6KHalf(b[i], h, q);
      const int8_t* sc = b[i].scales + 8 * h;
      for (int k = 0; k < 4; ++k) {
        Store16(_mm256_castsi256_si128(q[k]), _mm256_set1_ps(d * sc[2 * k]), zero, y + 32 * k);
        Store16(_mm256_extracti128_si256(q[k], 1), _mm256_set1_ps(d * sc[2 * k + 1]), zero,
                y + 32 * k + 16);
      }
    }
  }
}

}  // namespace

bool DequantizeFast(GgmlType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case GgmlType::kF16:
      F16(static_cast<const uint16_t*>(src), dst, n);
      return true;
    case GgmlType::kQ8_0:
      Q8_0(As<BlockQ8_0>(src), dst, n / kQK8_0);
      return true;
    case GgmlType::kQ4_0:
      Q4_0(As<BlockQ4_0>(src), dst, n / kQK4_0);
      return true;
    case GgmlType::kQ4_1:
      Q4_1(As<BlockQ4_1>(src), dst, n / kQK4_1);
      return true;
    case GgmlType::kQ5_0:
      Q5_0(As<BlockQ5_0>(src), dst, n / kQK5_0);
      return true;
    case GgmlType::kQ5_1:
      Q5_1(As<BlockQ5_1>(src), dst, n / kQK5_1);
      return true;
    case GgmlType::kQ4_K:
      QK<BlockQ4_K, false>(As<BlockQ4_K>(src), dst, n / kQK_K);
      return true;
    case GgmlType::kQ5_K:
      QK<BlockQ5_K, true>(As<BlockQ5_K>(src), dst, n / kQK_K);
      return true;
    case GgmlType::kQ6_K:
      Q6_K(As<BlockQ6_K>(src), dst, n / kQK_K);
      return true;
    default:
      return false;
  }
}

#else

bool DequantizeFast(GgmlType, const void*, float*, int64_t) { return false; }

#endif

}  // namespace pinfer::quants
