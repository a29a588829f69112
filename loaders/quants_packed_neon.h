// What the NEON packed kernels (quants_packed_neon.cc: Q4_0 / Q4_1 / Q8_0; quants_packed_k_neon.cc:
// Q4_K / Q5_K / Q6_K) share: the 4-byte dot of a weight vector with one activation lane, in two
// forms (the dot-product extension's SDOT by element, and plain ARMv8.0 widening multiplies with
// pairwise adds: the same exact int32s), and the tiling of rows x tokens. Internal to those two
// files (AArch64 only).
//
// Targets. The intrinsics of SDOT need the calling function compiled for the extension (GCC's
// arm_neon.h: armv8.2-a+dotprod), and a template takes the target of the region it is defined
// in, so this header's functions and the files' kernels sit between PINFER_NEON_DOT_BEGIN and
// PINFER_NEON_DOT_END, and each kernel comes in two instantiations: kDot true (SDOT) and false
// (no SDOT: intrinsics of ARMv8.0 only, and no scalar int8 dot loop the vectorizer could turn
// into one; scripts/aarch64.sh runs the tests on a Cortex-A53, which has no dot product, so an
// SDOT or another ARMv8.2 instruction there would fault). Each file's table function picks one
// at run time (kernel_set.h's CpuRunsNeonDotProd).
//
// Registers: an 8-row group's 32-byte chunk (4 bytes of each row, rows in order) is two 16-byte
// vectors, rows 0..3 and 4..7 (h = 0, 1): one int32 lane per row, so the block sums of a tile
// of 8 rows x NT tokens are 2 * NT int32x4_t, and its float chains 2 * NT float32x4_t, lane by
// lane the scalar reference's chain (vfmaq_f32 rounds each lane once, as std::fma).
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__clang__)
#define PINFER_NEON_DOT_BEGIN \
  _Pragma("clang attribute push(__attribute__((target(\"dotprod\"))), apply_to = function)")
#define PINFER_NEON_DOT_END _Pragma("clang attribute pop")
#else
#define PINFER_NEON_DOT_BEGIN \
  _Pragma("GCC push_options") _Pragma("GCC target(\"arch=armv8.2-a+dotprod\")")
#define PINFER_NEON_DOT_END _Pragma("GCC pop_options")
#endif

PINFER_NEON_DOT_BEGIN
namespace pinfer::quants {
namespace {

// acc + per lane i: sum_k w[4i + k] * a[4 * kLane + k] (k < 4), exact. Plain NEON: the 16
// products as int16 (|w| <= 128, |a| <= 127), pairs added (<= 32512, still int16), then pairs of
// pairs accumulated into the int32 lanes.
template <bool kDot, int kLane>
[[gnu::always_inline]] inline int32x4_t Dot4(int32x4_t acc, int8x16_t w, int8x16_t a) {
  if constexpr (kDot) {
    return vdotq_laneq_s32(acc, w, a, kLane);
  } else {
    const int8x16_t b = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(a), kLane));
    const int16x8_t p = vpaddq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(b)), vmull_high_s8(w, b));
    return vpadalq_s16(acc, p);
  }
}

// f(std::integral_constant<int, i>) for i = 0 .. N - 1, in order (lane indices must be constants).
template <int N, typename F>
[[gnu::always_inline]] inline void Unroll(F&& f) {
  [&]<int... i>(std::integer_sequence<int, i...>) __attribute__((always_inline)) {
    (f(std::integral_constant<int, i>{}), ...);
  }
  (std::make_integer_sequence<int, N>{});
}

// 8 fp16 (one per row of a group) as two float32x4_t, rows 0..3 and 4..7 (exact conversions).
inline void Half8(const uint16_t* p, float32x4_t out[2]) {
  const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
  out[0] = vcvt_f32_f16(vget_low_f16(h));
  out[1] = vcvt_high_f32_f16(h);
}

inline constexpr int kNeonTok = 4;                     // tokens per register tile
inline constexpr int64_t kNeonChunkBytes = 256 << 10;  // a token chunk's activation rows (L2)

// Both files' kernels (quants_packed.h's PackedDotFn): for each chunk of tokens whose
// activation rows fit kNeonChunkBytes, each 8-row group and each run of NT = 1 .. kNeonTok
// tokens, Tile::Run<NT>(group, nb, a, act_row_bytes, acc) adds to acc[t][h], zeroed here, the
// chains of token t of the run and rows 4h .. 4h + 3 of the group (its nb = n / kValues blocks
// of Tile::Block at group; a the run's first activation row); the rows below n_rows are stored. The
// results do not depend on the tiling (each lane is its pair's own chain).
template <int64_t kValues, class Tile>
void NeonPackedDot(const void* w, int64_t n_rows, const void* acts, int64_t act_row_bytes,
                   int n_tok, int64_t n, float* y, int64_t y_row_stride) {
  const auto* base = static_cast<const uint8_t*>(acts);
  const int64_t nb = n / kValues, groups = (n_rows + 7) / 8;
  const int chunk = static_cast<int>(
      std::max<int64_t>(kNeonTok, kNeonChunkBytes / act_row_bytes / kNeonTok * kNeonTok));
  for (int c0 = 0; c0 < n_tok; c0 += chunk) {
    const int c1 = std::min(n_tok, c0 + chunk);
    for (int64_t g = 0; g < groups; ++g) {
      const auto* group = static_cast<const typename Tile::Block*>(w) + g * nb;
      const int rows = static_cast<int>(std::min<int64_t>(8, n_rows - 8 * g));
      for (int t0 = c0; t0 < c1; t0 += kNeonTok) {
        const int nt = std::min(kNeonTok, c1 - t0);
        float32x4_t acc[kNeonTok][2];
        for (auto& row : acc) row[0] = row[1] = vdupq_n_f32(0.0f);
        const uint8_t* a = base + t0 * act_row_bytes;
        Unroll<kNeonTok>([&](auto i) {
          if (nt == i + 1) Tile::template Run<i + 1>(group, nb, a, act_row_bytes, acc);
        });
        for (int t = 0; t < nt; ++t) {
          float* out = y + (t0 + t) * y_row_stride + 8 * g;
          if (rows == 8) {
            vst1q_f32(out, acc[t][0]);
            vst1q_f32(out + 4, acc[t][1]);
          } else {
            float v[8];
            vst1q_f32(v, acc[t][0]);
            vst1q_f32(v + 4, acc[t][1]);
            std::memcpy(out, v, sizeof(float) * rows);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace pinfer::quants
PINFER_NEON_DOT_END
