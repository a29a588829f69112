// The AVX-512 VNNI set of quants_packed_k.h: 16 rows (two consecutive groups, one 32-bit lane
// per row of a 512-bit vector) x 8 tokens (Q6_K: 12) per register block, each 4-value dot one
// vpdpbusd against the token's 4 activation bytes broadcast, the sub-block scales by vpmulld,
// the mins (Q6_K: the offset) by vpdpwssd against the activation block sums
// (quants_packed_k_simd.h). A last odd group runs 8 rows in 256-bit vectors (AVX-512 VL).
// Bit for bit the row kernels of quants_q8k.h.
//
// As in quants_q8k_avx2.cc, only the code below the target pragma is compiled for AVX-512; the
// accessor at the end is baseline code (the caller checks cpuid: CpuRunsAvx512VnniPackedK).
#if defined(__x86_64__) || defined(_M_X64)
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() (a self-initialized local) as the
// pass-through of their masked builtins, which -Wmaybe-uninitialized reports once inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "loaders/quants_packed_k.h"

#if defined(__clang__)
#pragma clang attribute push(                                                      \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), \
    apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#endif

#include "loaders/quants_packed_k_simd.h"

namespace pinfer::quants {
namespace {

// One group, 256-bit EVEX dots (32 vector registers: more tokens than the VEX sets).
// Register blocks measured on packed_kquant_bench's 4096 x 4096 x 512 tokens (one core, loaded
// machine, CPU time): Q4_K 8 tokens split 681-692 Gop/s, 12 unsplit 609; Q6_K 8 tokens 425, 12
// tokens 479-488.
struct Narrow512 : Ymm {
  static constexpr int kTok = 8, kTok6 = 12, kSplitTok = 8, kQuadTok6 = 2;
  static I Dot4(I acc, I w, const uint8_t* a) { return _mm256_dpbusd_epi32(acc, w, Bcast(a)); }
  static I Dot2(I acc, I w, const uint8_t* b) { return _mm256_dpwssd_epi32(acc, w, Bcast(b)); }
};

// Two groups: lanes 0..7 the first's rows, 8..15 the second's (its fields gs bytes on).
struct Wide512 {
  using I = __m512i;
  using F = __m512;
  static constexpr int kRows = 16, kTok = 8, kTok6 = 12, kSplitTok = 8, kQuadTok6 = 2;
  static constexpr bool kI16 = false;
  static __m256i L256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static __m128i L128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
  static I Load(const void* p, int64_t gs) {
    return _mm512_inserti64x4(_mm512_zextsi256_si512(L256(p)),
                              L256(static_cast<const uint8_t*>(p) + gs), 1);
  }
  static I Zero() { return _mm512_setzero_si512(); }
  static I Set1(int v) { return _mm512_set1_epi32(v); }
  static I And(I a, I b) { return _mm512_and_si512(a, b); }
  static I Or(I a, I b) { return _mm512_or_si512(a, b); }
  static I Add(I a, I b) { return _mm512_add_epi32(a, b); }
  static I Sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I MulLo(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I Srli16(I a, int n) { return _mm512_srli_epi16(a, n); }
  static I Slli16(I a, int n) { return _mm512_slli_epi16(a, n); }
  static I Srli32(I a, int n) { return _mm512_srli_epi32(a, n); }
  static I Slli32(I a, int n) { return _mm512_slli_epi32(a, n); }
  static I Shuffle(I a, const Pattern& p) {
    return _mm512_shuffle_epi8(a, _mm512_broadcast_i64x4(L256(p.b)));
  }
  static I ScI8(const int8_t* p, int64_t gs) {
    const __m128i x = _mm_unpacklo_epi64(
        _mm_loadl_epi64(static_cast<const __m128i*>(static_cast<const void*>(p))),
        _mm_loadl_epi64(static_cast<const __m128i*>(static_cast<const void*>(p + gs))));
    return _mm512_cvtepi8_epi32(x);
  }
  static I Q6Pairs(const int8_t* p, int64_t gs) {
    return _mm512_cvtepi8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(Ymm::Pairs128(p)),
                                                        Ymm::Pairs128(p + gs), 1));
  }
  static I Dot4(I acc, I w, const uint8_t* a) {
    return _mm512_dpbusd_epi32(acc, w, _mm512_broadcastd_epi32(_mm_loadu_si32(a)));
  }
  static I Dot2(I acc, I w, const uint8_t* b) {
    return _mm512_dpwssd_epi32(acc, w, _mm512_broadcastd_epi32(_mm_loadu_si32(b)));
  }
  static F Half(const uint16_t* p, int64_t gs) {
    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(L128(p)),
                                              L128(reinterpret_cast<const uint8_t*>(p) + gs), 1);
    return _mm512_cvtph_ps(h);
  }
  static F Set1F(float v) { return _mm512_set1_ps(v); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F Fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static F ToF(I a) { return _mm512_cvtepi32_ps(a); }
  static F LoadF(const float* p) { return _mm512_loadu_ps(p); }
  static void StoreF(float* p, F v) { _mm512_storeu_ps(p, v); }
};

constexpr PackedKQuantKernels kAvx512Set{"avx512vnni", PackedDot<Wide512, Narrow512, kQ4>,
                                         PackedDot<Wide512, Narrow512, kQ5>,
                                         PackedDot<Wide512, Narrow512, kQ6>};

}  // namespace
}  // namespace pinfer::quants

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

namespace pinfer::quants {
const PackedKQuantKernels* Avx512VnniPackedKQuantKernels() { return &kAvx512Set; }
}  // namespace pinfer::quants

#else  // not x86-64

#include "loaders/quants_packed_k.h"

namespace pinfer::quants {
const PackedKQuantKernels* Avx512VnniPackedKQuantKernels() { return nullptr; }
}  // namespace pinfer::quants

#endif
