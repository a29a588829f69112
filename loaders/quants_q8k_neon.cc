// The NEON set of quants_q8k.h (AArch64): Q8_K activations and the Q4_K / Q5_K / Q6_K row dot
// products with 8-bit integer multiplies. Each weight block is decoded once into 256 codes
// (0..63, so they are also valid signed bytes) and its integer scales, then every token takes
// it: 16-byte products summed into int32 lanes by vdotq_s32 where the build targets the
// dot-product extension (__ARM_FEATURE_DOTPROD), by widening multiplies (vmull_s8, pairwise
// adds) otherwise, scaled per sub-block in int32 and totalled exactly; the float steps are the
// scalar reference's std::fma, so the sets agree bit for bit.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"
#include "loaders/quants_q8k.h"

namespace pinfer::quants {
namespace {

constexpr int64_t kActBlock = sizeof(BlockQ8_K);

// Lanewise int32 sums of the 16 products w[i] * a[i] (4 per lane), added to acc.
inline int32x4_t Dot16(int32x4_t acc, int8x16_t w, int8x16_t a) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, w, a);
#else
  // |w| <= 63 and |a| <= 127: a pair of products stays within int16.
  const int16x8_t p = vaddq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(a)), vmull_high_s8(w, a));
  return vpadalq_s16(acc, p);
#endif
}

// One weight block, decoded: q the 256 codes in value order, sc the sub-block scales (8 of 32
// values for Q4_K / Q5_K, 16 of 16 for Q6_K), m the mins (Q4_K / Q5_K).
struct Decoded {
  int8x16_t q[16];
  int32_t sc[16];
  int16_t m[8];
  float d, dmin;
};

inline void DecodeScales(const uint8_t* packed, Decoded* o) {
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    UnpackKScaleMin(packed, j, &sc, &m);
    o->sc[j] = sc;
    o->m[j] = static_cast<int16_t>(m);
  }
}

inline void DecodeBlock(const BlockQ4_K& b, Decoded* o) {
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
  for (int c = 0; c < 4; ++c) {  // chunk c: low nibbles sub-block 2c, high nibbles 2c+1
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t raw = vld1q_u8(b.qs + 32 * c + 16 * h);
      o->q[4 * c + h] = vreinterpretq_s8_u8(vandq_u8(raw, low4));
      o->q[4 * c + 2 + h] = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
    }
  }
  DecodeScales(b.scales, o);
  o->d = Fp16ToFp32(b.d);
  o->dmin = Fp16ToFp32(b.dmin);
}

inline void DecodeBlock(const BlockQ5_K& b, Decoded* o) {
  const uint8x16_t low4 = vdupq_n_u8(0x0f), bit4 = vdupq_n_u8(0x10);
  for (int h = 0; h < 2; ++h) {
    uint8x16_t hb = vld1q_u8(b.qh + 16 * h);  // bit 2c: sub-block 2c, bit 2c+1: 2c+1
    for (int c = 0; c < 4; ++c) {
      const uint8x16_t raw = vld1q_u8(b.qs + 32 * c + 16 * h);
      const uint8x16_t h0 = vandq_u8(vshlq_n_u8(hb, 4), bit4);
      const uint8x16_t h1 = vandq_u8(vshlq_n_u8(hb, 3), bit4);
      o->q[4 * c + h] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(raw, low4), h0));
      o->q[4 * c + 2 + h] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(raw, 4), h1));
      hb = vshrq_n_u8(hb, 2);
    }
  }
  DecodeScales(b.scales, o);
  o->d = Fp16ToFp32(b.d);
  o->dmin = Fp16ToFp32(b.dmin);
}

inline void DecodeBlock(const BlockQ6_K& b, Decoded* o) {
  const uint8x16_t low4 = vdupq_n_u8(0x0f), bits45 = vdupq_n_u8(0x30);
  for (int half = 0; half < 2; ++half) {  // 64 ql bytes, 32 qh bytes: values 128 half..
    for (int h = 0; h < 2; ++h) {         // bytes 16h..16h+15 of each 32
      const uint8x16_t ql0 = vld1q_u8(b.ql + 64 * half + 16 * h);
      const uint8x16_t ql1 = vld1q_u8(b.ql + 64 * half + 32 + 16 * h);
      const uint8x16_t qh = vld1q_u8(b.qh + 32 * half + 16 * h);
      int8x16_t* q = o->q + 8 * half + h;
      q[0] =
          vreinterpretq_s8_u8(vorrq_u8(vandq_u8(ql0, low4), vandq_u8(vshlq_n_u8(qh, 4), bits45)));
      q[2] =
          vreinterpretq_s8_u8(vorrq_u8(vandq_u8(ql1, low4), vandq_u8(vshlq_n_u8(qh, 2), bits45)));
      q[4] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh, bits45)));
      q[6] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(ql1, 4), vandq_u8(vshrq_n_u8(qh, 2), bits45)));
    }
  }
  for (int j = 0; j < 16; ++j) o->sc[j] = b.scales[j];
  o->d = Fp16ToFp32(b.d);
  o->dmin = 0.0f;
}

// One token's step over one decoded block, as quants_q8k.h fixes it.
template <bool kQ6>
inline float Step(const Decoded& w, const uint8_t* act_block, float acc) {
  const int8_t* qs = reinterpret_cast<const int8_t*>(act_block + offsetof(BlockQ8_K, qs));
  const int16x8_t bs0 =
      vld1q_s16(reinterpret_cast<const int16_t*>(act_block + offsetof(BlockQ8_K, bsums)));
  const int16x8_t bs1 =
      vld1q_s16(reinterpret_cast<const int16_t*>(act_block + offsetof(BlockQ8_K, bsums)) + 8);
  float d_a;
  std::memcpy(&d_a, act_block, sizeof(d_a));
  int32x4_t sumi = vdupq_n_s32(0);
  if constexpr (kQ6) {  // 16 sub-blocks of 16
    for (int j = 0; j < 16; ++j) {
      const int32x4_t s = Dot16(vdupq_n_s32(0), w.q[j], vld1q_s8(qs + 16 * j));
      sumi = vmlaq_n_s32(sumi, s, w.sc[j]);
    }
    // - 32 * sum_j sc[j] * bsums[j]
    int16_t sc16[16];
    for (int j = 0; j < 16; ++j) sc16[j] = static_cast<int16_t>(w.sc[j]);
    const int16x8_t s0 = vld1q_s16(sc16), s1 = vld1q_s16(sc16 + 8);
    int32x4_t off = vmull_s16(vget_low_s16(bs0), vget_low_s16(s0));
    off = vmlal_high_s16(off, bs0, s0);
    off = vmlal_s16(off, vget_low_s16(bs1), vget_low_s16(s1));
    off = vmlal_high_s16(off, bs1, s1);
    sumi = vsubq_s32(sumi, vshlq_n_s32(off, 5));
    return std::fma(w.d * d_a, static_cast<float>(vaddvq_s32(sumi)), acc);
  } else {  // 8 sub-blocks of 32
    for (int j = 0; j < 8; ++j) {
      int32x4_t s = Dot16(vdupq_n_s32(0), w.q[2 * j], vld1q_s8(qs + 32 * j));
      s = Dot16(s, w.q[2 * j + 1], vld1q_s8(qs + 32 * j + 16));
      sumi = vmlaq_n_s32(sumi, s, w.sc[j]);
    }
    const int16x8_t pairs = vpaddq_s16(bs0, bs1);  // bsums[2j] + bsums[2j+1]
    const int16x8_t m = vld1q_s16(w.m);
    const int32x4_t mins =
        vmlal_high_s16(vmull_s16(vget_low_s16(pairs), vget_low_s16(m)), pairs, m);
    acc = std::fma(w.d * d_a, static_cast<float>(vaddvq_s32(sumi)), acc);
    return std::fma(-(w.dmin * d_a), static_cast<float>(vaddvq_s32(mins)), acc);
  }
}

// Block by block, every token: y[t] accumulates in place.
template <typename Block>
void RowDot(const void* w_row, const void* acts, int64_t act_row_bytes, int n_tok, int64_t n,
            float* y, int64_t y_stride) {
  constexpr bool kQ6 = sizeof(Block) == sizeof(BlockQ6_K);
  const auto* w = static_cast<const Block*>(w_row);
  const auto* a = static_cast<const uint8_t*>(acts);
  for (int t = 0; t < n_tok; ++t) y[t * y_stride] = 0.0f;
  Decoded dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    DecodeBlock(w[i], &dec);
    const uint8_t* block = a + i * kActBlock;
    for (int t = 0; t < n_tok; ++t) {
      y[t * y_stride] = Step<kQ6>(dec, block + t * act_row_bytes, y[t * y_stride]);
    }
  }
}

void QuantizeQ8K(const float* x, void* out, int64_t n) {
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K, o += kActBlock) {
    float32x4_t vmax = vdupq_n_f32(0.0f);
    for (int j = 0; j < kQK_K; j += 4) vmax = vmaxq_f32(vmax, vabsq_f32(vld1q_f32(x + j)));
    const float amax = vmaxvq_f32(vmax);
    BlockQ8_K b;
    if (amax == 0.0f) {
      std::memset(&b, 0, sizeof(b));
      std::memcpy(o, &b, sizeof(b));
      continue;
    }
    float max = 0.0f;  // the first value of largest magnitude
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) == amax) {
        max = x[j];
        break;
      }
    }
    const float iscale = -127.0f / max;
    if (std::isinf(iscale)) {  // too small for a finite 127 / max: as a zero block
      std::memset(&b, 0, sizeof(b));
      std::memcpy(o, &b, sizeof(b));
      continue;
    }
    const int32x4_t top = vdupq_n_s32(127);
    for (int g = 0; g < 16; ++g) {  // 16 values: codes and their sum
      int32x4_t v[4];
      for (int k = 0; k < 4; ++k) {
        v[k] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 16 * g + 4 * k), iscale)), top);
      }
      const int16x8_t h0 = vcombine_s16(vqmovn_s32(v[0]), vqmovn_s32(v[1]));
      const int16x8_t h1 = vcombine_s16(vqmovn_s32(v[2]), vqmovn_s32(v[3]));
      vst1q_s8(b.qs + 16 * g, vcombine_s8(vqmovn_s16(h0), vqmovn_s16(h1)));
      b.bsums[g] =
          static_cast<int16_t>(vaddvq_s32(vaddq_s32(vaddq_s32(v[0], v[1]), vaddq_s32(v[2], v[3]))));
    }
    b.d = 1.0f / iscale;
    std::memcpy(o, &b, sizeof(b));
  }
}

#if defined(__ARM_FEATURE_DOTPROD)
constexpr const char* kName = "neon-dotprod";
#else
constexpr const char* kName = "neon";
#endif
constexpr KQuantKernels kNeonSet{kName, QuantizeQ8K, RowDot<BlockQ4_K>, RowDot<BlockQ5_K>,
                                 RowDot<BlockQ6_K>};

}  // namespace

const KQuantKernels* NeonKQuantKernels() { return &kNeonSet; }

}  // namespace pinfer::quants

#else  // not AArch64

#include "loaders/quants_q8k.h"

namespace pinfer::quants {
const KQuantKernels* NeonKQuantKernels() { return nullptr; }
}  // namespace pinfer::quants

#endif
