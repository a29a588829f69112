// The NEON set of quants_packed_k.h's kernels (AArch64): Q4_K, Q5_K and Q6_K in 8-row groups
// against Q8_K activations, in tiles of 8 rows x up to 4 tokens (quants_packed_neon.h). Per
// super-block and sub-block, the group's codes (4 bytes of each row per position k, decoded from
// the nibbles and high bits as 16-byte vectors, rows 0..3 and 4..7) meet the token's 4 activation
// bytes of that position (lane k % 4 of the sub-block's 16-byte activation vectors): the exact
// int32 sub-block sums of the 8 rows, times the rows' sub-block scales (int32 lanes), totalled
// exactly; the mins (Q4_K / Q5_K) and Q6_K's 32 * sum sc * bsums from the activations' bsums;
// then quants_q8k.h's float steps lane by lane. With the dot-product extension each 4-byte dot
// is one SDOT by element, otherwise widening multiplies; the table function picks by the CPU
// (kernel_set.h's CpuRunsNeonDotProd). Bit for bit the scalar set (and the row kernels). Speed:
// unmeasured (qemu only).
#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstdint>
#include <type_traits>

#include "loaders/kernel_set.h"
#include "loaders/quants_packed_k.h"
#include "loaders/quants_packed_neon.h"
#include "loaders/quants_q8k.h"

PINFER_NEON_DOT_BEGIN
namespace pinfer::quants {
namespace {

// Byte kB of each 32-bit lane of v as an int32.
template <int kB>
inline int32x4_t ByteOf(uint32x4_t v) {
  if constexpr (kB == 0) {
    return vreinterpretq_s32_u32(vandq_u32(v, vdupq_n_u32(0xff)));
  } else {
    return vreinterpretq_s32_u32(vandq_u32(vshrq_n_u32(v, 8 * kB), vdupq_n_u32(0xff)));
  }
}

// The bits of every byte of v selected by mask after a shift left by s (right for s < 0).
inline uint8x16_t Bits(const uint8_t* v, int s, uint8_t mask) {
  return vandq_u8(vshlq_u8(vld1q_u8(v), vdupq_n_s8(static_cast<int8_t>(s))), vdupq_n_u8(mask));
}

// 4 positions x 2 sub-vectors of codes against a token's two 16-byte activation vectors
// (positions k < 4 with lanes of a0, positions 4 + k with a1), the rows' sums of one sub-block
// (or, Q6_K, of two: s0 from a0, s1 from a1).
template <bool kDot>
[[gnu::always_inline]] inline void SubDots(const int8x16_t (*q)[2], const int8_t* a, int h,
                                           int32x4_t* s0, int32x4_t* s1) {
  const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
  Unroll<4>([&](auto k) __attribute__((always_inline)) {
    *s0 = Dot4<kDot, k>(*s0, q[k][h], a0);
    *s1 = Dot4<kDot, k>(*s1, q[k + 4][h], a1);
  });
}

// One tile (quants_packed_neon.h's NeonPackedDot): the group's nb super-blocks against NT tokens.
template <typename Packed, bool kDot>
struct Tile {
  using Block = Packed;
  template <int NT>
  [[gnu::flatten]] static void Run(const Packed* g, int64_t nb, const uint8_t* a,
                                   int64_t act_row_bytes, float32x4_t (*acc)[2]) {
    constexpr bool kQ5 = std::is_same_v<Packed, PackedQ5_K>;
    for (int64_t i = 0; i < nb; ++i) {
      const Packed& p = g[i];
      const BlockQ8_K* ab[NT];
      int32x4_t sumi[NT][2], other[NT][2];  // other: Q4_K / Q5_K summ, Q6_K the bsums offset
      for (int t = 0; t < NT; ++t) {
        ab[t] = reinterpret_cast<const BlockQ8_K*>(a + t * act_row_bytes) + i;
        sumi[t][0] = sumi[t][1] = other[t][0] = other[t][1] = vdupq_n_s32(0);
      }
      int8x16_t q[8][2];
      if constexpr (std::is_same_v<Packed, PackedQ6_K>) {
        int32x4_t sc[16][2];
        for (int j = 0; j < 16; ++j) {
          const int16x8_t s = vmovl_s8(vld1_s8(p.scales[j]));
          sc[j][0] = vmovl_s16(vget_low_s16(s));
          sc[j][1] = vmovl_high_s16(s);
        }
        for (int hh = 0; hh < 2; ++hh) {
          for (int c = 0; c < 2; ++c) {
            for (int qq = 0; qq < 2; ++qq) {  // low nibbles: quarter c, high: c + 2
              const int s0 = 8 * hh + 4 * qq + 2 * c, shift = 2 * c + 4 * qq;
              for (int k = 0; k < 8; ++k) {
                for (int h = 0; h < 2; ++h) {
                  const uint8x16_t raw = vld1q_u8(p.ql[hh][c][k][4 * h]);
                  const uint8x16_t lo = qq ? vshrq_n_u8(raw, 4) : vandq_u8(raw, vdupq_n_u8(0x0f));
                  q[k][h] =
                      vreinterpretq_s8_u8(vorrq_u8(lo, Bits(p.qh[hh][k][4 * h], 4 - shift, 0x30)));
                }
              }
              for (int t = 0; t < NT; ++t) {
                for (int h = 0; h < 2; ++h) {
                  int32x4_t d0 = vdupq_n_s32(0), d1 = vdupq_n_s32(0);
                  SubDots<kDot>(q, ab[t]->qs + 16 * s0, h, &d0, &d1);
                  sumi[t][h] = vmlaq_s32(vmlaq_s32(sumi[t][h], sc[s0][h], d0), sc[s0 + 1][h], d1);
                }
              }
            }
          }
        }
        for (int t = 0; t < NT; ++t) {
          for (int h = 0; h < 2; ++h) {
            for (int j = 0; j < 16; ++j) {
              other[t][h] = vmlaq_n_s32(other[t][h], sc[j][h], ab[t]->bsums[j]);
            }
            sumi[t][h] = vmlsq_n_s32(sumi[t][h], other[t][h], 32);  // exact: |sumi| < 2^31
          }
        }
      } else {
        // quants_internal.h's UnpackKScaleMin on each row's 12 bytes (words w = 0..2), as bytes
        // j & 3 of the lanes of scm[j / 4][0] (scales) and scm[j / 4][1] (mins).
        uint32x4_t scm[2][2][2];
        for (int h = 0; h < 2; ++h) {
          const uint32x4_t w0 = vld1q_u32(reinterpret_cast<const uint32_t*>(p.scales[0][4 * h]));
          const uint32x4_t w1 = vld1q_u32(reinterpret_cast<const uint32_t*>(p.scales[1][4 * h]));
          const uint32x4_t w2 = vld1q_u32(reinterpret_cast<const uint32_t*>(p.scales[2][4 * h]));
          const uint32x4_t m3f = vdupq_n_u32(0x3f3f3f3f), m0f = vdupq_n_u32(0x0f0f0f0f),
                           m30 = vdupq_n_u32(0x30303030);
          scm[0][0][h] = vandq_u32(w0, m3f);
          scm[0][1][h] = vandq_u32(w1, m3f);
          scm[1][0][h] = vorrq_u32(vandq_u32(w2, m0f), vandq_u32(vshrq_n_u32(w0, 2), m30));
          scm[1][1][h] =
              vorrq_u32(vandq_u32(vshrq_n_u32(w2, 4), m0f), vandq_u32(vshrq_n_u32(w1, 2), m30));
        }
        Unroll<8>([&](auto j) {
          for (int k = 0; k < 8; ++k) {
            for (int h = 0; h < 2; ++h) {
              const uint8x16_t raw = vld1q_u8(p.qs[j / 2][k][4 * h]);
              uint8x16_t v = j % 2 ? vshrq_n_u8(raw, 4) : vandq_u8(raw, vdupq_n_u8(0x0f));
              if constexpr (kQ5) v = vorrq_u8(v, Bits(p.qh[k][4 * h], 4 - j, 0x10));
              q[k][h] = vreinterpretq_s8_u8(v);
            }
          }
          for (int t = 0; t < NT; ++t) {
            const int32_t bs = ab[t]->bsums[2 * j] + ab[t]->bsums[2 * j + 1];
            for (int h = 0; h < 2; ++h) {
              int32x4_t d = vdupq_n_s32(0);
              SubDots<kDot>(q, ab[t]->qs + 32 * j, h, &d, &d);
              sumi[t][h] = vmlaq_s32(sumi[t][h], ByteOf<j % 4>(scm[j / 4][0][h]), d);
              other[t][h] = vmlaq_n_s32(other[t][h], ByteOf<j % 4>(scm[j / 4][1][h]), bs);
            }
          }
        });
      }
      float32x4_t d[2], dmin[2];
      Half8(p.d, d);
      if constexpr (!std::is_same_v<Packed, PackedQ6_K>) Half8(p.dmin, dmin);
      for (int t = 0; t < NT; ++t) {
        const float da = ab[t]->d;
        for (int h = 0; h < 2; ++h) {
          acc[t][h] = vfmaq_f32(acc[t][h], vmulq_n_f32(d[h], da), vcvtq_f32_s32(sumi[t][h]));
          if constexpr (!std::is_same_v<Packed, PackedQ6_K>) {
            acc[t][h] = vfmaq_f32(acc[t][h], vnegq_f32(vmulq_n_f32(dmin[h], da)),
                                  vcvtq_f32_s32(other[t][h]));
          }
        }
      }
    }
  }
};

template <bool kDot>
struct Sets {
  static constexpr PackedKQuantKernels kTable = {
      "neon", NeonPackedDot<kQK_K, Tile<PackedQ4_K, kDot>>,
      NeonPackedDot<kQK_K, Tile<PackedQ5_K, kDot>>, NeonPackedDot<kQK_K, Tile<PackedQ6_K, kDot>>};
};

}  // namespace

// The table for this CPU's dot-product extension (kernel_set.h).
const PackedKQuantKernels* NeonPackedKQuantKernels() {
  return CpuRunsNeonDotProd() ? &Sets<true>::kTable : &Sets<false>::kTable;
}

}  // namespace pinfer::quants
PINFER_NEON_DOT_END

#endif  // __aarch64__
