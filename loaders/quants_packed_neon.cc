// The NEON set of quants_packed.h's kernels (AArch64): Q4_0, Q4_1 and Q8_0 in 8-row groups
// against Q8A activations, in tiles of 8 rows x up to 4 tokens (quants_packed_neon.h). Per
// block, chunk c of the group's codes (4 bytes of each row) meets token t's activation bytes
// 4c..4c+3 (Q4_0 / Q4_1: low nibbles; Q8_0: chunk c < 4) and 16 + 4c..16 + 4c + 3 (high nibbles;
// Q8_0: chunk c + 4) as lane c of the two 16-byte activation vectors: 16 4-byte dots per block
// and token into the exact int32 block sums of the 8 rows, then the header's float steps lane by
// lane. Q8_0's stored code + 128 is flipped back to the signed code (xor 0x80) first. With the
// dot-product extension each 4-byte dot is one SDOT by element (vdotq_laneq_s32), otherwise
// widening multiplies; the table function picks by the CPU (kernel_set.h's CpuRunsNeonDotProd).
// Bit for bit the scalar set. Speed: unmeasured (the ARM build runs under qemu only).
#if defined(__aarch64__)
#include "loaders/quants_packed_neon.h"

#include <arm_neon.h>

#include <cstdint>

#include "loaders/kernel_set.h"
#include "loaders/quants_packed.h"
#include "loaders/quants_q8a.h"

PINFER_NEON_DOT_BEGIN
namespace pinfer::quants {
namespace {

// The two code vectors that chunk c's lane c pairs with activation vectors 0 and 1: rows 4h..4h+3.
template <GgmlType T>
inline void Codes(const uint8_t* qs, int c, int h, int8x16_t out[2]) {
  if constexpr (T == GgmlType::kQ8_0) {
    const uint8x16_t flip = vdupq_n_u8(0x80);
    out[0] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(qs + 32 * c + 16 * h), flip));
    out[1] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(qs + 32 * (c + 4) + 16 * h), flip));
  } else {
    const uint8x16_t raw = vld1q_u8(qs + 32 * c + 16 * h);
    out[0] = vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0f)));
    out[1] = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
  }
}

// One tile (quants_packed_neon.h's NeonPackedDot): the group's nb blocks against NT tokens.
template <GgmlType T, typename B, bool kDot>
struct Tile {
  using Block = B;
  template <int NT>
  [[gnu::flatten]] static void Run(const Block* g, int64_t nb, const uint8_t* a,
                                   int64_t act_row_bytes, float32x4_t (*acc)[2]) {
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8A* ab[NT];
      int8x16_t av[NT][2];
      int32x4_t isum[NT][2];
      for (int t = 0; t < NT; ++t) {
        ab[t] = reinterpret_cast<const BlockQ8A*>(a + t * act_row_bytes) + b;
        av[t][0] = vld1q_s8(ab[t]->qs);
        av[t][1] = vld1q_s8(ab[t]->qs + 16);
        isum[t][0] = isum[t][1] = vdupq_n_s32(0);
      }
      Unroll<4>([&](auto c) __attribute__((always_inline)) {
        for (int h = 0; h < 2; ++h) {
          int8x16_t q[2];
          Codes<T>(g[b].qs, c, h, q);
          for (int t = 0; t < NT; ++t) {
            isum[t][h] = Dot4<kDot, c>(Dot4<kDot, c>(isum[t][h], q[0], av[t][0]), q[1], av[t][1]);
          }
        }
      });
      float32x4_t dw[2], mw[2];
      Half8(g[b].d, dw);
      if constexpr (T == GgmlType::kQ4_1) Half8(g[b].m, mw);
      for (int t = 0; t < NT; ++t) {
        const float da = ab[t]->d;
        for (int h = 0; h < 2; ++h) {
          int32x4_t i = isum[t][h];
          if constexpr (T == GgmlType::kQ4_0) i = vsubq_s32(i, vdupq_n_s32(8 * ab[t]->sum));
          acc[t][h] = vfmaq_f32(acc[t][h], vmulq_n_f32(dw[h], da), vcvtq_f32_s32(i));
          if constexpr (T == GgmlType::kQ4_1) {
            const float32x4_t sum_a = vdupq_n_f32(static_cast<float>(ab[t]->sum));
            acc[t][h] = vfmaq_f32(acc[t][h], vmulq_n_f32(mw[h], da), sum_a);
          }
        }
      }
    }
  }
};

template <bool kDot>
constexpr PackedQ8AKernels kSet = {"neon",
                                   NeonPackedDot<kQK8A, Tile<GgmlType::kQ4_0, BlockQ4_0x8, kDot>>,
                                   NeonPackedDot<kQK8A, Tile<GgmlType::kQ4_1, BlockQ4_1x8, kDot>>,
                                   NeonPackedDot<kQK8A, Tile<GgmlType::kQ8_0, BlockQ8_0x8, kDot>>};

}  // namespace

const PackedQ8AKernels* NeonPackedQ8AKernels() {
  return CpuRunsNeonDotProd() ? &kSet<true> : &kSet<false>;
}

}  // namespace pinfer::quants
PINFER_NEON_DOT_END

#endif  // __aarch64__
