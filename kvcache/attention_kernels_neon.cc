// The NEON attention kernels (AArch64's baseline vector unit, so every 64-bit ARM CPU runs
// them): attention_kernels_simd.h over pairs of 128-bit vectors. f32, f16, bf16, q8_0 and
// q4_0 rows are decoded in registers; fp8 through a decoded copy.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kvcache/attention_kernels.h"
#include "kvcache/attention_kernels_simd.h"
#include "kvcache/kv_codec.h"
#include "loaders/quants.h"

namespace pinfer::attention {
namespace {

struct Neon {
  struct V {
    float32x4_t lo, hi;
  };
  static V Zero() { return {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }
  static V Set(float x) { return {vdupq_n_f32(x), vdupq_n_f32(x)}; }
  static V Load(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
  static void Store(float* p, V v) { vst1q_f32(p, v.lo), vst1q_f32(p + 4, v.hi); }
  static V Add(V a, V b) { return {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)}; }
  static V Sub(V a, V b) { return {vsubq_f32(a.lo, b.lo), vsubq_f32(a.hi, b.hi)}; }
  static V Mul(V a, V b) { return {vmulq_f32(a.lo, b.lo), vmulq_f32(a.hi, b.hi)}; }
  static V Fma(V a, V b, V c) { return {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)}; }
  static V Fnma(V a, V b, V c) {
    return {vfmsq_f32(c.lo, a.lo, b.lo), vfmsq_f32(c.hi, a.hi, b.hi)};
  }
  static V Min(V a, V b) { return {vminq_f32(a.lo, b.lo), vminq_f32(a.hi, b.hi)}; }
  static V Max(V a, V b) { return {vmaxq_f32(a.lo, b.lo), vmaxq_f32(a.hi, b.hi)}; }
  static V Round(V x) { return {vrndnq_f32(x.lo), vrndnq_f32(x.hi)}; }
  static float32x4_t Pow2(float32x4_t n) {
    const int32x4_t e = vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127));
    return vreinterpretq_f32_s32(vshlq_n_s32(e, 23));
  }
  static V Pow2(V n) { return {Pow2(n.lo), Pow2(n.hi)}; }
  static float Sum(V v) { return vaddvq_f32(vaddq_f32(v.lo, v.hi)); }
  static float Half(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
  }
  static V F16(const uint8_t* p) {
    const uint16x8_t h = vld1q_u16(reinterpret_cast<const uint16_t*>(p));
    return {vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))),
            vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(h)))};
  }
  static V Bf16(const uint8_t* p) {  // the 16 bits are the high half of the float
    const uint16x8_t h = vld1q_u16(reinterpret_cast<const uint16_t*>(p));
    return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
            vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16))};
  }
  static V Widen(int16x8_t w) {
    return {vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), vcvtq_f32_s32(vmovl_s16(vget_high_s16(w)))};
  }
  static V I8(const int8_t* p) { return Widen(vmovl_s8(vld1_s8(p))); }
  static V Nibbles(const uint8_t* p, bool high) {
    uint8x8_t b = vld1_u8(p);
    b = high ? vshr_n_u8(b, 4) : vand_u8(b, vdup_n_u8(15));
    return Widen(vreinterpretq_s16_u16(vmovl_u8(b)));
  }
};

constexpr AttentionKernels kNeon = {"neon", simd::Score<Neon>, simd::ExpSum<Neon>,
                                    simd::Accumulate<Neon>};

}  // namespace

const AttentionKernels* NeonAttentionKernels() { return &kNeon; }

}  // namespace pinfer::attention

#else  // not AArch64

#include "kvcache/attention_kernels.h"

namespace pinfer::attention {
const AttentionKernels* NeonAttentionKernels() { return nullptr; }
}  // namespace pinfer::attention

#endif
