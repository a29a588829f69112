// The NEON set of quants_q8a.h (AArch64): the Q8A activation quantizer and the Q4_0 / Q4_1 /
// Q5_0 / Q5_1 / Q8_0 row dot products with 8-bit integer multiplies. Each weight block is
// decoded once into 32 codes in value order (two 16-byte registers; the nibble formats' 0..31
// are valid signed bytes) and up to 4 tokens take it. The block's integer sum is the sum of the
// int32 lanes of two 16-byte dots: vdotq_s32 where the build targets the dot-product extension
// (__ARM_FEATURE_DOTPROD; each lane sums 4 consecutive byte products), else widening multiplies
// (vmull_s8) with two pairwise adds, the same exact int32s. The float steps are the header's
// (std::fma per block, in row order), so the set agrees bit for bit with the scalar reference. The
// default armv8-a build has no __ARM_FEATURE_DOTPROD and always takes the widening path (a build
// with -march=armv8.2-a+dotprod or later, PAGEDINFER_SIMD, takes vdotq_s32).
#if defined(__aarch64__)
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_q8a.h"

namespace pinfer::quants {
namespace {

// The lanewise int32 sums of 4 consecutive products w[4l..4l+3] * a[4l..4l+3] (l < 4).
inline int32x4_t Dot16(int8x16_t w, int8x16_t a) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(vdupq_n_s32(0), w, a);
#else
  // |w| <= 128 and |a| <= 127: a pair of products stays within int16 (<= 32512).
  const int16x8_t p0 = vmull_s8(vget_low_s8(w), vget_low_s8(a));  // products 0..7
  const int16x8_t p1 = vmull_high_s8(w, a);                       // products 8..15
  return vpaddlq_s16(vpaddq_s16(p0, p1));  // pairs, then pairs of pairs: 4 consecutive
#endif
}

void Quantize(const float* x, void* out, int64_t n) {
  auto* b = static_cast<BlockQ8A*>(out);
  for (int64_t i = 0; i < n / kQK8A; ++i, x += kQK8A) {
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; ++k) {
      v[k] = vld1q_f32(x + 4 * k);
      m = vmaxq_f32(m, vabsq_f32(v[k]));
    }
    const float amax = vmaxvq_f32(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32x4_t q[8];
    int32x4_t sum = vdupq_n_s32(0);
    for (int k = 0; k < 8; ++k) {
      // vcvtnq rounds to nearest even, as NearestInt (std::nearbyint in the default mode).
      q[k] = vcvtnq_s32_f32(vmulq_n_f32(v[k], id));
      sum = vaddq_s32(sum, q[k]);
    }
    for (int h = 0; h < 2; ++h) {
      const int16x8_t lo = vcombine_s16(vqmovn_s32(q[4 * h]), vqmovn_s32(q[4 * h + 1]));
      const int16x8_t hi = vcombine_s16(vqmovn_s32(q[4 * h + 2]), vqmovn_s32(q[4 * h + 3]));
      vst1q_s8(b[i].qs + 16 * h, vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi)));
    }
    // The stored scale as the scalar set's (fp16.h's nearest-even half within its normal range).
    b[i].d = d >= kQ8AHalfMin && d <= kQ8AHalfMax ? Fp16ToFp32(Fp32ToFp16(d)) : d;
    b[i].sum = vaddvq_s32(sum);
  }
}

// One weight block: its 32 codes in value order and its coefficients.
struct WBlock {
  int8x16_t q[2];
  float d;  // d_w
  float m;  // m_w (Q4_1, Q5_1)
};

inline void Nibbles(const uint8_t* qs, WBlock& w) {
  const uint8x16_t raw = vld1q_u8(qs);
  w.q[0] = vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0f)));
  w.q[1] = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
}

// The fifth bits (bit j of the little-endian qh: value j) as 0x10 in the codes.
inline void FifthBits(const uint8_t* qh, WBlock& w) {
  static constexpr uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bit = vld1q_u8(kBit), sixteen = vdupq_n_u8(0x10);
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t bytes = vcombine_u8(vdup_n_u8(qh[2 * h]), vdup_n_u8(qh[2 * h + 1]));
    const uint8x16_t hb = vandq_u8(vtstq_u8(bytes, bit), sixteen);
    w.q[h] = vreinterpretq_s8_u8(vorrq_u8(vreinterpretq_u8_s8(w.q[h]), hb));
  }
}

template <GgmlType T>
inline void Decode(const uint8_t* blk, WBlock& w) {
  if constexpr (T == GgmlType::kQ4_0) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(blk);
    Nibbles(b->qs, w);
    w.d = Fp16ToFp32(b->d);
  } else if constexpr (T == GgmlType::kQ4_1) {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(blk);
    Nibbles(b->qs, w);
    w.d = Fp16ToFp32(b->d), w.m = Fp16ToFp32(b->m);
  } else if constexpr (T == GgmlType::kQ5_0) {
    const auto* b = reinterpret_cast<const BlockQ5_0*>(blk);
    Nibbles(b->qs, w);
    FifthBits(b->qh, w);
    w.d = Fp16ToFp32(b->d);
  } else if constexpr (T == GgmlType::kQ5_1) {
    const auto* b = reinterpret_cast<const BlockQ5_1*>(blk);
    Nibbles(b->qs, w);
    FifthBits(b->qh, w);
    w.d = Fp16ToFp32(b->d), w.m = Fp16ToFp32(b->m);
  } else {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(blk);
    w.q[0] = vld1q_s8(b->qs);
    w.q[1] = vld1q_s8(b->qs + 16);
    w.d = Fp16ToFp32(b->d);
  }
}

// The offset formats' m_w term (Q4_1, Q5_1) and the exact integer offset (Q4_0: i_b -= 8 sum_a,
// Q5_0: 16 sum_a).
template <GgmlType T>
constexpr bool kHasMin = T == GgmlType::kQ4_1 || T == GgmlType::kQ5_1;
template <GgmlType T>
constexpr int32_t kOffset = T == GgmlType::kQ4_0   ? 8
                            : T == GgmlType::kQ5_0 ? 16
                                                   : 0;

// NT tokens (a[t] their rows) against one weight row of nb blocks; y[t] as the header says. Four
// blocks at a time: each token's four blocks' lane vectors reduce together (pairwise adds) to one
// vector of the four exact block sums; the offsets, int -> float conversions and scale products
// are vector operations, and only the header's fma chain is scalar. The blocks past the last
// multiple of 4 take one at a time. RowDot runs it for a single token (decode), where the one
// chain bounds the speed; batches take DotTokenLanes.
template <GgmlType T, typename Block, int NT>
void DotTokens(const uint8_t* w, const BlockQ8A* const* a, int64_t nb, float* const* y) {
  constexpr int64_t kBytes = sizeof(Block);
  float acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    WBlock wb[4];
    float dw[4], mw[4];
    for (int k = 0; k < 4; ++k) {
      Decode<T>(w + (b + k) * kBytes, wb[k]);
      dw[k] = wb[k].d;
      if constexpr (kHasMin<T>) mw[k] = wb[k].m;
    }
    const float32x4_t dwv = vld1q_f32(dw);
    float s[NT][4], f[NT][4], sm[NT][4], fs[NT][4];
    for (int t = 0; t < NT; ++t) {
      const BlockQ8A* ab = a[t] + b;
      int32x4_t v[4];
      for (int k = 0; k < 4; ++k) {
        v[k] = vaddq_s32(Dot16(wb[k].q[0], vld1q_s8(ab[k].qs)),
                         Dot16(wb[k].q[1], vld1q_s8(ab[k].qs + 16)));
      }
      // [v0 lanes 0+1, 2+3, v1 ...], then the four blocks' whole sums in block order.
      int32x4_t isum = vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3]));
      const float da_s[4] = {ab[0].d, ab[1].d, ab[2].d, ab[3].d};
      const float32x4_t da = vld1q_f32(da_s);
      vst1q_f32(s[t], vmulq_f32(dwv, da));
      if constexpr (kOffset<T> != 0 || kHasMin<T>) {
        const int32_t suma_s[4] = {ab[0].sum, ab[1].sum, ab[2].sum, ab[3].sum};
        const int32x4_t suma = vld1q_s32(suma_s);
        if constexpr (kOffset<T> != 0) {
          isum = vmlsq_n_s32(isum, suma, kOffset<T>);  // exact: |i_b| < 2^24
        } else {
          vst1q_f32(sm[t], vmulq_f32(vld1q_f32(mw), da));
          vst1q_f32(fs[t], vcvtq_f32_s32(suma));
        }
      }
      vst1q_f32(f[t], vcvtq_f32_s32(isum));
    }
    for (int k = 0; k < 4; ++k) {
      for (int t = 0; t < NT; ++t) {
        acc[t] = std::fma(s[t][k], f[t][k], acc[t]);
        if constexpr (kHasMin<T>) acc[t] = std::fma(sm[t][k], fs[t][k], acc[t]);
      }
    }
  }
  for (; b < nb; ++b) {
    WBlock wb;
    Decode<T>(w + b * kBytes, wb);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8A& ab = a[t][b];
      const int32x4_t i0 = Dot16(wb.q[0], vld1q_s8(ab.qs));
      const int32x4_t i1 = Dot16(wb.q[1], vld1q_s8(ab.qs + 16));
      const int32_t i = vaddvq_s32(vaddq_s32(i0, i1)) - kOffset<T> * ab.sum;
      acc[t] = std::fma(wb.d * ab.d, static_cast<float>(i), acc[t]);
      if constexpr (kHasMin<T>) {
        acc[t] = std::fma(wb.m * ab.d, static_cast<float>(ab.sum), acc[t]);
      }
    }
  }
  for (int t = 0; t < NT; ++t) *y[t] = acc[t];
}

// Four tokens in the lanes of one float32x4_t, so their four chains of the header's fma step are
// one vfmaq_f32 per block (lane t is exactly token t's scalar chain: the vector fma rounds each
// lane once). a[t] are the token rows (lanes past the caller's nt repeat a row and are not
// written). Per block: each token's two dots' lanes, reduced with pairwise adds across the four
// tokens to one vector of the block sums i_b; d_a and sum_a loaded across the tokens.
template <GgmlType T, typename Block>
void DotTokenLanes(const uint8_t* w, const BlockQ8A* const* a, int64_t nb, float* const* y,
                   int nt) {
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    WBlock wb;
    Decode<T>(w + b * static_cast<int64_t>(sizeof(Block)), wb);
    int32x4_t v[4];
    for (int t = 0; t < 4; ++t) {
      const BlockQ8A& ab = a[t][b];
      v[t] = vaddq_s32(Dot16(wb.q[0], vld1q_s8(ab.qs)), Dot16(wb.q[1], vld1q_s8(ab.qs + 16)));
    }
    int32x4_t isum = vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3]));
    const float da_s[4] = {a[0][b].d, a[1][b].d, a[2][b].d, a[3][b].d};
    const float32x4_t da = vld1q_f32(da_s);
    int32x4_t suma = vdupq_n_s32(0);
    if constexpr (kOffset<T> != 0 || kHasMin<T>) {
      const int32_t suma_s[4] = {a[0][b].sum, a[1][b].sum, a[2][b].sum, a[3][b].sum};
      suma = vld1q_s32(suma_s);
    }
    if constexpr (kOffset<T> != 0) isum = vmlsq_n_s32(isum, suma, kOffset<T>);  // exact
    acc = vfmaq_f32(acc, vmulq_n_f32(da, wb.d), vcvtq_f32_s32(isum));
    if constexpr (kHasMin<T>) acc = vfmaq_f32(acc, vmulq_n_f32(da, wb.m), vcvtq_f32_s32(suma));
  }
  float out[4];
  vst1q_f32(out, acc);
  for (int t = 0; t < nt; ++t) *y[t] = out[t];
}

// Tokens in groups of 4 in vector lanes (2 or 3 left: a 4-lane group), one left (decode) with
// four blocks per vector (DotTokens). Every path computes the header's floats, so a token's
// result does not depend on its group.
template <GgmlType T, typename Block>
void RowDot(const void* w_row, const void* acts, int64_t act_row_bytes, int n_tok, int64_t n,
            float* y, int64_t y_stride) {
  const auto* w = static_cast<const uint8_t*>(w_row);
  const auto* base = static_cast<const uint8_t*>(acts);
  const int64_t nb = n / kQK8A;
  const BlockQ8A* a[4];
  float* out[4];
  int t0 = 0;
  for (; n_tok - t0 >= 2; t0 += 4) {
    const int nt = std::min(4, n_tok - t0);
    for (int t = 0; t < 4; ++t) {
      const int tok = t0 + std::min(t, nt - 1);
      a[t] = reinterpret_cast<const BlockQ8A*>(base + tok * act_row_bytes);
      out[t] = y + tok * y_stride;
    }
    DotTokenLanes<T, Block>(w, a, nb, out, nt);
  }
  for (; t0 < n_tok; ++t0) {
    a[0] = reinterpret_cast<const BlockQ8A*>(base + t0 * act_row_bytes);
    out[0] = y + t0 * y_stride;
    DotTokens<T, Block, 1>(w, a, nb, out);
  }
}

#if defined(__ARM_FEATURE_DOTPROD)
constexpr const char* kName = "neon-dotprod";
#else
constexpr const char* kName = "neon";
#endif
constexpr Q8AKernels kNeonSet{kName,
                              Quantize,
                              RowDot<GgmlType::kQ4_0, BlockQ4_0>,
                              RowDot<GgmlType::kQ4_1, BlockQ4_1>,
                              RowDot<GgmlType::kQ5_0, BlockQ5_0>,
                              RowDot<GgmlType::kQ5_1, BlockQ5_1>,
                              RowDot<GgmlType::kQ8_0, BlockQ8_0>};

}  // namespace

const Q8AKernels* NeonQ8AKernels() { return &kNeonSet; }

}  // namespace pinfer::quants

#else  // not AArch64

#include "loaders/quants_q8a.h"

namespace pinfer::quants {
const Q8AKernels* NeonQ8AKernels() { return nullptr; }
}  // namespace pinfer::quants

#endif
