// The AVX2 + FMA + F16C attention kernels: attention_kernels_simd.h over 256-bit vectors.
// f32, f16, bf16, q8_0 and q4_0 rows are decoded in registers; fp8 through a decoded copy.
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kvcache/attention_kernels.h"
#include "kvcache/kv_codec.h"
#include "loaders/quants.h"

// Everything below is compiled for AVX2 (see attention_kernels_simd.h on why not the whole
// file): the includes above are compiled for the build's baseline.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "kvcache/attention_kernels_simd.h"

namespace pinfer::attention {
namespace {

struct Avx2 {
  using V = __m256;
  static V Zero() { return _mm256_setzero_ps(); }
  static V Set(float x) { return _mm256_set1_ps(x); }
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V Fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
  static V Min(V a, V b) { return _mm256_min_ps(a, b); }
  static V Max(V a, V b) { return _mm256_max_ps(a, b); }
  static V Round(V x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V Pow2(V n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static float Sum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float Half(uint16_t h) { return _cvtsh_ss(h); }
  static V F16(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static V Bf16(const uint8_t* p) {  // the 16 bits are the high half of the float
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static V I8(const int8_t* p) {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
  }
  static V Nibbles(const uint8_t* p, bool high) {
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    if (high) b = _mm_srli_epi16(b, 4);
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_and_si128(b, _mm_set1_epi8(15))));
  }
};

constexpr AttentionKernels kAvx2 = {"avx2", simd::Score<Avx2>, simd::ExpSum<Avx2>,
                                    simd::Accumulate<Avx2>};

}  // namespace

const AttentionKernels* Avx2AttentionKernels() { return &kAvx2; }

}  // namespace pinfer::attention

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

#else  // not x86-64

#include "kvcache/attention_kernels.h"

namespace pinfer::attention {
const AttentionKernels* Avx2AttentionKernels() { return nullptr; }
}  // namespace pinfer::attention

#endif
