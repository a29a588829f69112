// The AVX2 set of quants_q8a.h: 32 weight codes per block in one register, multiplied into each
// token's 32 activation codes with maddubs (unsigned x signed bytes, pairs summed to int16)
// and madd (pairs summed to int32) into eight int32 lanes whose sum is the block's exact integer
// sum (the header's i_b before its offset); see DotTokens for the reduction and the float chain.
// PINFER_AVXVNNI: 1 when quants_*_avxvnni.cc includes this file to build the same kernels for
// the AVX-VNNI set (one vpdpbusd per u8 x s8 dot, see DotU8S8); 0 for the AVX2 set.
#ifndef PINFER_AVXVNNI
#define PINFER_AVXVNNI 0
#define PINFER_AVXVNNI_COMPILES 1
#endif
#if (defined(__x86_64__) || defined(_M_X64)) && PINFER_AVXVNNI_COMPILES
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"
#include "loaders/quants_q8a.h"

// Everything below is compiled for AVX2 + FMA + F16C (see quants_simd.h).
#if PINFER_AVXVNNI && defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#elif PINFER_AVXVNNI && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "loaders/quants_simd.h"

#if PINFER_AVXVNNI
#define PINFER_Q8A_NS q8a_avxvnni
#define PINFER_Q8A_NAME "avxvnni"
#define PINFER_Q8A_ACCESSOR AvxVnniQ8AKernels
#else
#define PINFER_Q8A_NS q8a_avx2
#define PINFER_Q8A_NAME "avx2"
#define PINFER_Q8A_ACCESSOR Avx2Q8AKernels
#endif

namespace pinfer::quants::PINFER_Q8A_NS {
namespace {
using namespace simd;

// The eight int32 lanes of a u8 x s8 dot: lane l = sum of u[4l + j] * s[4l + j], j < 4. AVX2:
// vpmaddubsw (pairs to int16, saturating) then vpmaddwd by ones; AVX-VNNI: one vpdpbusd (no
// int16 step). The two are equal here because vpmaddubsw never saturates: u is a weight code,
// 0..15 (4-bit), 0..31 (5-bit) or |w| <= 128 (Q8_0, its sign moved onto the activation), and
// s an activation code with |s| <= 127, so a pair sums to at most 2 x 128 x 127 = 32512 < 32767.
// So the sets' integer sums, and every float after them, are bit for bit the same.
inline __m256i DotU8S8(__m256i u, __m256i s) {
#if PINFER_AVXVNNI
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

void Quantize(const float* x, void* out, int64_t n) {
  auto* b = static_cast<BlockQ8A*>(out);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = 0; i < n / kQK8A; ++i, x += kQK8A) {
    const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 m =
        _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                      _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    // cvtps rounds to nearest even (the default MXCSR mode), as NearestInt.
    const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, idv));
    const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, idv));
    const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, idv));
    const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, idv));
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    // Packing works within 128-bit halves; the permute puts the 32 codes back in value order.
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs), _mm256_permutevar8x32_epi32(p, order));
    // The scalar set's Q8AScale through F16C (the same nearest-even rounding).
    b[i].d = d >= kQ8AHalfMin && d <= kQ8AHalfMax
                 ? _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT))
                 : d;
    b[i].sum = _mm_cvtsi128_si32(s4);
  }
}

// One weight block's codes (32 bytes in value order) and coefficients.
struct WBlock {
  __m256i q;    // unsigned codes; for Q8_0 |q| (with `sgn` the signed codes)
  __m256i sgn;  // Q8_0 only
  float d;      // d_w
  float m;      // m_w (Q4_1, Q5_1)
};

template <GgmlType T>
inline void Decode(const uint8_t* blk, WBlock& w) {
  if constexpr (T == GgmlType::kQ4_0) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(blk);
    w.q = Nibbles16(b->qs), w.d = HalfToFloat(b->d);
  } else if constexpr (T == GgmlType::kQ4_1) {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(blk);
    w.q = Nibbles16(b->qs), w.d = HalfToFloat(b->d), w.m = HalfToFloat(b->m);
  } else if constexpr (T == GgmlType::kQ5_0) {
    const auto* b = reinterpret_cast<const BlockQ5_0*>(blk);
    w.q = _mm256_or_si256(Nibbles16(b->qs), FifthBits(b->qh));
    w.d = HalfToFloat(b->d);
  } else if constexpr (T == GgmlType::kQ5_1) {
    const auto* b = reinterpret_cast<const BlockQ5_1*>(blk);
    w.q = _mm256_or_si256(Nibbles16(b->qs), FifthBits(b->qh));
    w.d = HalfToFloat(b->d), w.m = HalfToFloat(b->m);
  } else {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(blk);
    w.sgn = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
    w.q = _mm256_abs_epi8(w.sgn), w.d = HalfToFloat(b->d);
  }
}

// The offset formats' m_w term (Q4_1, Q5_1) and the exact integer offset's shift (Q4_0: i_b -=
// 8 sum_a, Q5_0: 16 sum_a).
template <GgmlType T>
constexpr bool kHasMin = T == GgmlType::kQ4_1 || T == GgmlType::kQ5_1;
template <GgmlType T>
constexpr int kOffsetShift = T == GgmlType::kQ4_0   ? 3
                             : T == GgmlType::kQ5_0 ? 4
                                                    : 0;

// The eight int32 lanes of one block's q_j a_j (their sum is the block's sum_j q_j a_j).
template <GgmlType T>
inline __m256i Lanes(const WBlock& w, const BlockQ8A& ab) {
  __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
  if constexpr (T == GgmlType::kQ8_0) av = _mm256_sign_epi8(av, w.sgn);
  return DotU8S8(w.q, av);
}

inline int32_t SumLanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// NT tokens (a[t] their rows) against one weight row of nb blocks; y[t] as the header says.
// Eight blocks at a time: each token's eight lane vectors reduce together (hadd) to one vector of
// the eight exact block sums; the offsets, int -> float conversions and scale products are
// vector operations, and only the header's fma chain is scalar, the NT tokens' chains
// interleaved so they overlap. The blocks past the last multiple of 8 take one at a time.
template <GgmlType T, typename Block, int NT>
void DotTokens(const uint8_t* w, const BlockQ8A* const* a, int64_t nb, float* const* y) {
  constexpr int64_t kBytes = sizeof(Block);
  constexpr int kAStride = sizeof(BlockQ8A) / sizeof(float);  // a block's d and sum, in 4 bytes
  static_assert(sizeof(BlockQ8A) % sizeof(float) == 0 && offsetof(BlockQ8A, sum) == 4);
  const __m256i gather =
      _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(kAStride));
  float acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    alignas(32) float dw[8], mw[8];
    __m256i h[NT][4];  // hadd of blocks (2k, 2k + 1)
    for (int k = 0; k < 8; k += 2) {
      WBlock w0, w1;
      Decode<T>(w + (b + k) * kBytes, w0);
      Decode<T>(w + (b + k + 1) * kBytes, w1);
      dw[k] = w0.d, dw[k + 1] = w1.d;
      if constexpr (kHasMin<T>) mw[k] = w0.m, mw[k + 1] = w1.m;
      for (int t = 0; t < NT; ++t) {
        h[t][k / 2] = _mm256_hadd_epi32(Lanes<T>(w0, a[t][b + k]), Lanes<T>(w1, a[t][b + k + 1]));
      }
    }
    const __m256 dwv = _mm256_load_ps(dw);
    alignas(32) float s[NT][8], f[NT][8], sm[NT][8], fs[NT][8];
    for (int t = 0; t < NT; ++t) {
      // x: blocks 0..3's lanes 0..3 summed, then their lanes 4..7; y: the same for blocks 4..7.
      const __m256i x = _mm256_hadd_epi32(h[t][0], h[t][1]);
      const __m256i yv = _mm256_hadd_epi32(h[t][2], h[t][3]);
      __m256i isum =
          _mm256_add_epi32(_mm256_permute2x128_si256(x, yv, 0x21), _mm256_blend_epi32(x, yv, 0xf0));
      const BlockQ8A* ab = a[t] + b;
      const __m256 da = _mm256_i32gather_ps(&ab->d, gather, 4);
      _mm256_store_ps(s[t], _mm256_mul_ps(dwv, da));
      if constexpr (kOffsetShift<T> != 0 || kHasMin<T>) {
        const __m256i suma = _mm256_i32gather_epi32(&ab->sum, gather, 4);
        if constexpr (kOffsetShift<T> != 0) {
          isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(suma, kOffsetShift<T>));
        } else {
          _mm256_store_ps(sm[t], _mm256_mul_ps(_mm256_load_ps(mw), da));
          _mm256_store_ps(fs[t], _mm256_cvtepi32_ps(suma));
        }
      }
      _mm256_store_ps(f[t], _mm256_cvtepi32_ps(isum));
    }
    for (int k = 0; k < 8; ++k) {
      for (int t = 0; t < NT; ++t) {
        acc[t] = FmaScalar(s[t][k], f[t][k], acc[t]);
        if constexpr (kHasMin<T>) acc[t] = FmaScalar(sm[t][k], fs[t][k], acc[t]);
      }
    }
  }
  for (; b < nb; ++b) {
    WBlock wb;
    Decode<T>(w + b * kBytes, wb);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8A& ab = a[t][b];
      int32_t i = SumLanes(Lanes<T>(wb, ab));
      if constexpr (kOffsetShift<T> != 0) i -= ab.sum * (1 << kOffsetShift<T>);
      acc[t] = FmaScalar(wb.d * ab.d, static_cast<float>(i), acc[t]);
      if constexpr (kHasMin<T>) {
        acc[t] = FmaScalar(wb.m * ab.d, static_cast<float>(ab.sum), acc[t]);
      }
    }
  }
  for (int t = 0; t < NT; ++t) *y[t] = acc[t];
}

template <GgmlType T, typename Block>
void RowDot(const void* w_row, const void* acts, int64_t act_row_bytes, int n_tok, int64_t n,
            float* y, int64_t y_stride) {
  constexpr int kGroup = 4;  // tokens sharing each decoded weight block
  const auto* w = static_cast<const uint8_t*>(w_row);
  const auto* base = static_cast<const uint8_t*>(acts);
  const int64_t nb = n / kQK8A;
  for (int t0 = 0; t0 < n_tok; t0 += kGroup) {
    const BlockQ8A* a[kGroup];
    float* out[kGroup];
    const int nt = std::min(kGroup, n_tok - t0);
    for (int t = 0; t < nt; ++t) {
      a[t] = reinterpret_cast<const BlockQ8A*>(base + (t0 + t) * act_row_bytes);
      out[t] = y + (t0 + t) * y_stride;
    }
    switch (nt) {
      case 4:
        DotTokens<T, Block, 4>(w, a, nb, out);
        break;
      case 3:
        DotTokens<T, Block, 3>(w, a, nb, out);
        break;
      case 2:
        DotTokens<T, Block, 2>(w, a, nb, out);
        break;
      default:
        DotTokens<T, Block, 1>(w, a, nb, out);
    }
  }
}

constexpr Q8AKernels kAvx2 = {PINFER_Q8A_NAME,
                              Quantize,
                              RowDot<GgmlType::kQ4_0, BlockQ4_0>,
                              RowDot<GgmlType::kQ4_1, BlockQ4_1>,
                              RowDot<GgmlType::kQ5_0, BlockQ5_0>,
                              RowDot<GgmlType::kQ5_1, BlockQ5_1>,
                              RowDot<GgmlType::kQ8_0, BlockQ8_0>};

}  // namespace
}  // namespace pinfer::quants::PINFER_Q8A_NS

namespace pinfer::quants {
const Q8AKernels* PINFER_Q8A_ACCESSOR() { return &PINFER_Q8A_NS::kAvx2; }
}  // namespace pinfer::quants

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

#else  // not x86-64 (or no AVX-VNNI in this compiler)

#include "loaders/quants_q8a.h"

namespace pinfer::quants {
#if PINFER_AVXVNNI
const Q8AKernels* AvxVnniQ8AKernels() { return nullptr; }
#else
const Q8AKernels* Avx2Q8AKernels() { return nullptr; }
#endif
}  // namespace pinfer::quants

#endif
