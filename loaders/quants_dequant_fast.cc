// AVX2 row dequantization: the decoders of quants_decode.h with their groups stored. The
// scalar kernels in quants_legacy.cc / quants_k.cc give the same floats (up to the sign of a
// zero Q4_0 weight): d * q is exact in float for every format, so the fused multiply-subtract
// here and the scalar multiply then subtract round once, at the same place.
#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define PINFER_DEQUANT_AVX2 1
#include "loaders/quants_decode.h"
#endif

namespace pinfer::quants {

#if PINFER_DEQUANT_AVX2
namespace {
using namespace simd;

void F16(const uint16_t* h, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  }
  for (; i < n; ++i) y[i] = Fp16ToFp32(h[i]);
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

#else

bool DequantizeFast(GgmlType, const void*, float*, int64_t) { return false; }

#endif

}  // namespace pinfer::quants
