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
#include <cstdint>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"
#include "loaders/quants_q8a.h"

// Everything below is compiled for AVX2 + FMA + F16C (see quants_simd.h).
#include "loaders/x86_target_push.h"
// (x86_target_push.h: AVX2 + FMA + F16C, and AVX-VNNI with PINFER_AVXVNNI.)
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
// RowDot runs it for a single token (decode), where the one chain (an fma's latency per block,
// two for Q4_1 / Q5_1) bounds the speed; batches take DotTokenLanes.
template <GgmlType T, typename Block, int NT>
void DotTokens(const uint8_t* w, const BlockQ8A* const* a, int64_t nb, float* const* y) {
  constexpr int64_t kBytes = sizeof(Block);
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
      const __m256 da =
          _mm256_setr_ps(ab[0].d, ab[1].d, ab[2].d, ab[3].d, ab[4].d, ab[5].d, ab[6].d, ab[7].d);
      _mm256_store_ps(s[t], _mm256_mul_ps(dwv, da));
      if constexpr (kOffsetShift<T> != 0 || kHasMin<T>) {
        const __m256i suma = _mm256_setr_epi32(ab[0].sum, ab[1].sum, ab[2].sum, ab[3].sum,
                                               ab[4].sum, ab[5].sum, ab[6].sum, ab[7].sum);
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

// L = 4 or 8 tokens in the lanes of one float vector, so the L chains of the header's fma step
// are one vector fma per block (lane t is exactly token t's scalar chain: a vector fma rounds
// each lane once). a[t] are the token rows (t < L; lanes past the caller's nt repeat a row and
// are not written). Per block: each token's eight lane sums, reduced (hadd) across the tokens to
// one vector of the L block sums i_b; d_a and sum_a loaded across the tokens (scalar loads and
// inserts: measured faster than vgatherdps here); s = d_w * d_a as a vector.
template <int L>
struct Lanes8;
template <>
struct Lanes8<8> {
  using F = __m256;
  using I = __m256i;
  static I Reduce(const __m256i* v) {
    const __m256i x =
        _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i y =
        _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(x, y, 0x21), _mm256_blend_epi32(x, y, 0xf0));
  }
  static F Set1(float v) { return _mm256_set1_ps(v); }
  static F Zero() { return _mm256_setzero_ps(); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F Cvt(I v) { return _mm256_cvtepi32_ps(v); }
  template <int kShift>
  static I SubShifted(I v, I s) {
    return _mm256_sub_epi32(v, _mm256_slli_epi32(s, kShift));
  }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
};
template <>
struct Lanes8<4> {
  using F = __m128;
  using I = __m128i;
  static I Reduce(const __m256i* v) {
    const __m256i x =
        _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    return _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  }
  static F Set1(float v) { return _mm_set1_ps(v); }
  static F Zero() { return _mm_setzero_ps(); }
  static F Mul(F a, F b) { return _mm_mul_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm_fmadd_ps(a, b, c); }
  static F Cvt(I v) { return _mm_cvtepi32_ps(v); }
  template <int kShift>
  static I SubShifted(I v, I s) {
    return _mm_sub_epi32(v, _mm_slli_epi32(s, kShift));
  }
  static void Store(float* p, F v) { _mm_storeu_ps(p, v); }
};

template <GgmlType T, typename Block, int L>
void DotTokenLanes(const uint8_t* w, const BlockQ8A* const* a, int64_t nb, float* const* y,
                   int nt) {
  using V = Lanes8<L>;
  typename V::F acc = V::Zero();
  for (int64_t b = 0; b < nb; ++b) {
    WBlock wb;
    Decode<T>(w + b * static_cast<int64_t>(sizeof(Block)), wb);
    __m256i v[L];
    for (int t = 0; t < L; ++t) v[t] = Lanes<T>(wb, a[t][b]);
    typename V::I isum = V::Reduce(v);
    typename V::F da;
    if constexpr (L == 8) {
      da = _mm256_setr_ps(a[0][b].d, a[1][b].d, a[2][b].d, a[3][b].d, a[4][b].d, a[5][b].d,
                          a[6][b].d, a[7][b].d);
    } else {
      da = _mm_setr_ps(a[0][b].d, a[1][b].d, a[2][b].d, a[3][b].d);
    }
    typename V::I suma;
    if constexpr (kOffsetShift<T> != 0 || kHasMin<T>) {
      if constexpr (L == 8) {
        suma = _mm256_setr_epi32(a[0][b].sum, a[1][b].sum, a[2][b].sum, a[3][b].sum, a[4][b].sum,
                                 a[5][b].sum, a[6][b].sum, a[7][b].sum);
      } else {
        suma = _mm_setr_epi32(a[0][b].sum, a[1][b].sum, a[2][b].sum, a[3][b].sum);
      }
    }
    if constexpr (kOffsetShift<T> != 0) isum = V::template SubShifted<kOffsetShift<T>>(isum, suma);
    acc = V::Fma(V::Mul(V::Set1(wb.d), da), V::Cvt(isum), acc);
    if constexpr (kHasMin<T>) acc = V::Fma(V::Mul(V::Set1(wb.m), da), V::Cvt(suma), acc);
  }
  float out[L];
  V::Store(out, acc);
  for (int t = 0; t < nt; ++t) *y[t] = out[t];
}

// Tokens t0.. of the call: groups of 8 and 4 in vector lanes (DotTokenLanes), 2 or 3 left in a
// 4-lane group, one left (decode) with the eight blocks per vector of DotTokens. Every path
// computes the header's floats, so a token's result does not depend on its group.
template <GgmlType T, typename Block>
void RowDot(const void* w_row, const void* acts, int64_t act_row_bytes, int n_tok, int64_t n,
            float* y, int64_t y_stride) {
  const auto* w = static_cast<const uint8_t*>(w_row);
  const auto* base = static_cast<const uint8_t*>(acts);
  const int64_t nb = n / kQK8A;
  const BlockQ8A* a[8];
  float* out[8];
  int t0 = 0;
  while (n_tok - t0 >= 2) {
    const int nt = std::min(8, n_tok - t0);
    for (int t = 0; t < 8; ++t) {
      const int tok = t0 + std::min(t, nt - 1);
      a[t] = reinterpret_cast<const BlockQ8A*>(base + tok * act_row_bytes);
      out[t] = y + tok * y_stride;
    }
    if (nt == 8) {
      DotTokenLanes<T, Block, 8>(w, a, nb, out, 8);
      t0 += 8;
    } else {
      const int g = std::min(nt, 4);
      DotTokenLanes<T, Block, 4>(w, a, nb, out, g);
      t0 += g;
    }
  }
  for (; t0 < n_tok; ++t0) {
    a[0] = reinterpret_cast<const BlockQ8A*>(base + t0 * act_row_bytes);
    out[0] = y + t0 * y_stride;
    DotTokens<T, Block, 1>(w, a, nb, out);
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

#include "loaders/x86_target_pop.h"

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
