// Type dispatch for row dequantization, quantization and dot products, plus the plain float
// formats (F32, F16, BF16) and AVX2 dequantization of the formats read most often.
#include "loaders/quants.h"

#include <algorithm>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

#if defined(__AVX2__) && defined(__F16C__)
#define PINFER_DEQUANT_AVX2 1
#include <immintrin.h>
#endif

namespace pinfer {
namespace {

template <typename Block>
const Block* As(const void* p) {
  return static_cast<const Block*>(p);
}
template <typename Block>
Block* AsMut(void* p) {
  return static_cast<Block*>(p);
}

void DequantF16(const uint16_t* h, float* y, int64_t n) {
  int64_t i = 0;
#if PINFER_DEQUANT_AVX2
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  }
#endif
  for (; i < n; ++i) y[i] = Fp16ToFp32(h[i]);
}

void DequantQ8_0Fast(const BlockQ8_0* b, float* y, int64_t nb) {
#if PINFER_DEQUANT_AVX2
  for (int64_t i = 0; i < nb; ++i, y += kQK8_0) {
    const __m256 d = _mm256_set1_ps(Fp16ToFp32(b[i].d));
    for (int k = 0; k < kQK8_0; k += 8) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + k));
      _mm256_storeu_ps(y + k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
    }
  }
#else
  quants::DequantQ8_0(b, y, nb);
#endif
}

void DequantQ4_0Fast(const BlockQ4_0* b, float* y, int64_t nb) {
#if PINFER_DEQUANT_AVX2
  const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
    const __m256 d = _mm256_set1_ps(Fp16ToFp32(b[i].d));
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs));
    const __m128i halves[2] = {_mm_sub_epi8(_mm_and_si128(v, low4), eight),
                               _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), low4), eight)};
    for (int h = 0; h < 2; ++h) {
      const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(halves[h]));
      const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(halves[h], 8)));
      _mm256_storeu_ps(y + 16 * h, _mm256_mul_ps(d, lo));
      _mm256_storeu_ps(y + 16 * h + 8, _mm256_mul_ps(d, hi));
    }
  }
#else
  quants::DequantQ4_0(b, y, nb);
#endif
}

// Dot product for formats without a fused kernel: dequantize a few blocks at a time into a
// stack buffer and take float dot products of the pieces.
float DotViaBuffer(GgmlType t, const void* row, const float* x, int64_t n) {
  const GgmlTypeInfo& info = GgmlTypeInfoOf(t);
  constexpr int64_t kChunk = 256;
  const int64_t per_chunk = std::max<int64_t>(1, kChunk / info.block_size) * info.block_size;
  float buf[kChunk];
  float sum = 0.0f;
  const auto* bytes = static_cast<const uint8_t*>(row);
  for (int64_t i = 0; i < n; i += per_chunk) {
    const int64_t len = std::min(per_chunk, n - i);
    DequantizeRow(t, bytes + GgmlRowBytes(t, i), buf, len);
    sum += DotF32(buf, x + i, len);
  }
  return sum;
}

}  // namespace

void DequantizeRow(GgmlType t, const void* src, float* dst, int64_t n) {
  using namespace quants;
  switch (t) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16:
      return DequantF16(static_cast<const uint16_t*>(src), dst, n);
    case GgmlType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(h[i]);
      return;
    }
    case GgmlType::kQ4_0:
      return DequantQ4_0Fast(As<BlockQ4_0>(src), dst, n / kQK4_0);
    case GgmlType::kQ4_1:
      return DequantQ4_1(As<BlockQ4_1>(src), dst, n / kQK4_1);
    case GgmlType::kQ5_0:
      return DequantQ5_0(As<BlockQ5_0>(src), dst, n / kQK5_0);
    case GgmlType::kQ5_1:
      return DequantQ5_1(As<BlockQ5_1>(src), dst, n / kQK5_1);
    case GgmlType::kQ8_0:
      return DequantQ8_0Fast(As<BlockQ8_0>(src), dst, n / kQK8_0);
    case GgmlType::kQ4_K:
      return DequantQ4_K(As<BlockQ4_K>(src), dst, n / kQK_K);
    case GgmlType::kQ5_K:
      return DequantQ5_K(As<BlockQ5_K>(src), dst, n / kQK_K);
    case GgmlType::kQ6_K:
      return DequantQ6_K(As<BlockQ6_K>(src), dst, n / kQK_K);
    default:  // unsupported storage type: documented to produce zeros
      std::fill(dst, dst + n, 0.0f);
      return;
  }
}

void QuantizeRow(GgmlType t, const float* src, void* dst, int64_t n) {
  using namespace quants;
  switch (t) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToFp16(src[i]);
      return;
    }
    case GgmlType::kBF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToBf16(src[i]);
      return;
    }
    case GgmlType::kQ4_0:
      return QuantQ4_0(src, AsMut<BlockQ4_0>(dst), n / kQK4_0);
    case GgmlType::kQ4_1:
      return QuantQ4_1(src, AsMut<BlockQ4_1>(dst), n / kQK4_1);
    case GgmlType::kQ5_0:
      return QuantQ5_0(src, AsMut<BlockQ5_0>(dst), n / kQK5_0);
    case GgmlType::kQ5_1:
      return QuantQ5_1(src, AsMut<BlockQ5_1>(dst), n / kQK5_1);
    case GgmlType::kQ8_0:
      return QuantQ8_0(src, AsMut<BlockQ8_0>(dst), n / kQK8_0);
    case GgmlType::kQ4_K:
      return QuantQ4_K(src, AsMut<BlockQ4_K>(dst), n / kQK_K);
    case GgmlType::kQ5_K:
      return QuantQ5_K(src, AsMut<BlockQ5_K>(dst), n / kQK_K);
    case GgmlType::kQ6_K:
      return QuantQ6_K(src, AsMut<BlockQ6_K>(dst), n / kQK_K);
    default:  // unsupported storage type: documented to write nothing
      return;
  }
}

float DotRow(GgmlType t, const void* row, const float* x, int64_t n) {
  using namespace quants;
  switch (t) {
    case GgmlType::kF32:
      return DotF32(static_cast<const float*>(row), x, n);
    case GgmlType::kF16:
      return DotF16(static_cast<const uint16_t*>(row), x, n);
    case GgmlType::kBF16:
      return DotBF16(static_cast<const uint16_t*>(row), x, n);
    case GgmlType::kQ4_0:
      return DotQ4_0(As<BlockQ4_0>(row), x, n / kQK4_0);
    case GgmlType::kQ4_1:
      return DotQ4_1(As<BlockQ4_1>(row), x, n / kQK4_1);
    case GgmlType::kQ8_0:
      return DotQ8_0(As<BlockQ8_0>(row), x, n / kQK8_0);
    case GgmlType::kQ4_K:
      return DotQ4_K(As<BlockQ4_K>(row), x, n / kQK_K);
    case GgmlType::kQ5_K:
      return DotQ5_K(As<BlockQ5_K>(row), x, n / kQK_K);
    case GgmlType::kQ6_K:
      return DotQ6_K(As<BlockQ6_K>(row), x, n / kQK_K);
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
      return DotViaBuffer(t, row, x, n);
    default:  // unsupported storage type: documented to return 0
      return 0.0f;
  }
}

}  // namespace pinfer
