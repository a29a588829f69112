// The AVX2 set of quants_tile.h: Q4_K / Q5_K / Q6_K tiles of up to 3 weight rows x 4 tokens
// against Q8_K activations. Per weight block, the tile's int32 sum vectors (one per (row, token)
// pair) stay in registers while the 8 groups of 32 codes go by: each group is decoded once per
// row (quants_q8k_avx2_blocks.h) and multiplied into the 4 tokens' activation codes (vpmaddubsw,
// then vpmaddwd by the sub-block scales), each activation vector loaded once for all the rows.
// The sum vectors (and the min sums') are then reduced eight at a time, pair p = 4 * row + token
// in lane p % 8 of float vector p / 8, and the float steps of quants_q8k.h run lane by lane as
// fused multiply-adds (the scalar reference's std::fma): bit for bit the row kernels' values.
//
// Cache blocking: the tokens go in chunks whose activation rows fit in half of a 512 KiB L2 (Zen 3;
// a quarter of Zen 4's); within a chunk, each 3 weight rows (L1-resident) meet every 4-token
// group in turn.
//
// As in quants_q8k_avx2.cc, only the code below the target pragma is compiled for AVX2; the
// accessor at the end is baseline code (the caller checks cpuid before calling the kernels).
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "loaders/quants_q8k.h"
#include "loaders/quants_tile.h"
#include "loaders/x86_target_push.h"
// The vector code from here to x86_target_pop.h: compiled for AVX2 + FMA + F16C.
#include "loaders/quants_q8k_avx2_blocks.h"

namespace pinfer::quants {
namespace {

using namespace q8k_avx2;  // NOLINT: the block decoders, shared with quants_q8k_avx2.cc

// 3 x 4: 12 int32 sum vectors. Measured on gemm_bench's 4096 x 4096 x 512-token Q4_K / Q5_K /
// Q6_K problem (one Zen 4 core, AVX2, before the register pinning below): 3 x 4 and 3 x 5 lead
// (about 148, 135, 142 GOP/s), then 4 x 4, 2 x 8, 1 x 12, 2 x 6 and 2 x 4 (125-135), 1 x 8 and
// 4 x 2 (106-130); the row kernels give about 91.
constexpr int kTileRows = 3, kTileTokens = 4;
constexpr int64_t kChunkBytes = 256 << 10;  // a token chunk's activations (half a Zen 3 L2)

// The totals of eight int32 vectors, v[j]'s in lane j.
inline __m256i Sum8(const __m256i (&v)[8]) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  // a: v0..v3's low-half sums, then their high-half sums; b the same for v4..v7.
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

// One weight block of R rows (w[r]) against T tokens' activation blocks (a[t]): pair p = T * r +
// t is lane p % 8 of acc[p / 8], its float accumulator; the lanes past R * T stay zero.
template <bool kQ6, int R, int T, typename W>
inline void Step(const W (&w)[R], const uint8_t* const (&a)[T], __m256 (&acc)[(R * T + 7) / 8]) {
  constexpr int kVecs = (R * T + 7) / 8;
  __m256i sumi[8 * kVecs], side[8 * kVecs];
  for (int p = 0; p < 8 * kVecs; ++p) sumi[p] = side[p] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    // Row by row: the row's codes and scales and the 12 sums fill the 16 registers; the
    // activation vectors come from L1 as memory operands of vpmaddubsw (holding them in
    // registers across the rows spilled the sums: 20% more instructions, measured slower).
    for (int r = 0; r < R; ++r) {
      const __m256i q = w[r].Q(k), scale = w[r].Scale(k);
      for (int t = 0; t < T; ++t) {
        const __m256i p = _mm256_maddubs_epi16(q, Load(a[t] + kQsOffset + 32 * k));
        sumi[T * r + t] = _mm256_add_epi32(sumi[T * r + t], _mm256_madd_epi16(p, scale));
      }
    }
    // Keeps the sums in registers, one group of codes at a time (unpinned, GCC interleaves the
    // 8 groups' decoding and spills the products: 20% more instructions, 10% slower).
    for (int p = 0; p < R * T; ++p) asm("" : "+x"(sumi[p]));
  }
  for (int t = 0; t < T; ++t) {
    const __m256i bsums = Load(a[t] + kBsumsOffset);
    for (int r = 0; r < R; ++r) side[T * r + t] = _mm256_madd_epi16(bsums, w[r].Side());
  }
  alignas(32) float d_w[8 * kVecs] = {}, d_a[8 * kVecs] = {}, dmin[8 * kVecs] = {};
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      d_w[T * r + t] = w[r].d;
      dmin[T * r + t] = w[r].dmin;
      d_a[T * r + t] = ScaleOf(a[t]);
    }
  }
  for (int v = 0; v < kVecs; ++v) {
    const __m256 da = _mm256_load_ps(d_a + 8 * v);
    const __m256 dw = _mm256_load_ps(d_w + 8 * v);
    __m256i(&si)[8] = *reinterpret_cast<__m256i(*)[8]>(sumi + 8 * v);
    __m256i(&sd)[8] = *reinterpret_cast<__m256i(*)[8]>(side + 8 * v);
    if constexpr (kQ6) {  // sumi - 32 * sum_j sc[j] * bsums[j]
      for (int p = 0; p < 8; ++p) si[p] = _mm256_sub_epi32(si[p], _mm256_slli_epi32(sd[p], 5));
      acc[v] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(Sum8(si)), acc[v]);
    } else {
      const __m256 dm = _mm256_load_ps(dmin + 8 * v);
      acc[v] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(Sum8(si)), acc[v]);
      acc[v] = _mm256_fnmadd_ps(_mm256_mul_ps(dm, da), _mm256_cvtepi32_ps(Sum8(sd)), acc[v]);
    }
  }
}

template <typename Reg, typename Block, int R, std::size_t... I>
inline void MakeRegs(const Block* const (&rows)[R], int64_t i, std::index_sequence<I...>,
                     auto&& f) {
  const Reg regs[R] = {Reg(rows[I][i])...};
  f(regs);
}

// R rows (w + r * w_row_bytes) x T tokens (act + t * act_row_bytes), nb blocks each.
template <typename Block, int R, int T>
void Tile(const uint8_t* w, int64_t w_row_bytes, const uint8_t* act, int64_t act_row_bytes,
          int64_t nb, float* y, int64_t y_row_stride) {
  constexpr bool kQ6 = sizeof(Block) == sizeof(BlockQ6_K);
  constexpr int kVecs = (R * T + 7) / 8;
  using Reg = typename RegOf<Block>::Type;
  const Block* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Block*>(w + r * w_row_bytes);
  __m256 acc[kVecs];
  for (int v = 0; v < kVecs; ++v) acc[v] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* a[T];
    for (int t = 0; t < T; ++t) a[t] = act + t * act_row_bytes + i * kActBlock;
    MakeRegs<Reg, Block, R>(rows, i, std::make_index_sequence<R>(),
                            [&](const Reg(&regs)[R]) { Step<kQ6, R, T>(regs, a, acc); });
  }
  alignas(32) float out[8 * kVecs];
  for (int v = 0; v < kVecs; ++v) _mm256_store_ps(out + 8 * v, acc[v]);
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) y[t * y_row_stride + r] = out[T * r + t];
  }
}

using TileFn = void (*)(const uint8_t*, int64_t, const uint8_t*, int64_t, int64_t, float*, int64_t);

template <typename Block, int R, std::size_t... T>
constexpr std::array<TileFn, kTileTokens> TokenTiles(std::index_sequence<T...>) {
  return {Tile<Block, R, static_cast<int>(T) + 1>...};
}
template <typename Block, std::size_t... R>
constexpr std::array<std::array<TileFn, kTileTokens>, kTileRows> AllTiles(
    std::index_sequence<R...>) {
  return {TokenTiles<Block, static_cast<int>(R) + 1>(std::make_index_sequence<kTileTokens>())...};
}
// kTiles<Block>[r - 1][t - 1]: the r x t tile.
template <typename Block>
constexpr auto kTiles = AllTiles<Block>(std::make_index_sequence<kTileRows>());

template <typename Block>
void TileDot(const void* w, int64_t w_row_bytes, int n_rows, const void* acts,
             int64_t act_row_bytes, int n_tok, int64_t n, float* y, int64_t y_row_stride) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(acts);
  const int64_t nb = n / kQK_K;
  const int chunk = static_cast<int>(std::max<int64_t>(
      kTileTokens, kChunkBytes / std::max<int64_t>(act_row_bytes, 1) / kTileTokens * kTileTokens));
  for (int c0 = 0; c0 < n_tok; c0 += chunk) {
    const int c1 = std::min(n_tok, c0 + chunk);
    for (int r0 = 0; r0 < n_rows; r0 += kTileRows) {
      const int nr = std::min(kTileRows, n_rows - r0);
      const uint8_t* rows = wb + r0 * w_row_bytes;
      for (int t0 = c0; t0 < c1; t0 += kTileTokens) {
        const int nt = std::min(kTileTokens, c1 - t0);
        kTiles<Block>[nr - 1][nt - 1](rows, w_row_bytes, ab + t0 * act_row_bytes, act_row_bytes, nb,
                                      y + t0 * y_row_stride + r0, y_row_stride);
      }
    }
  }
}

constexpr KQuantTileKernels kAvx2Set{"avx2", TileDot<BlockQ4_K>, TileDot<BlockQ5_K>,
                                     TileDot<BlockQ6_K>};

}  // namespace
}  // namespace pinfer::quants

#include "loaders/x86_target_pop.h"

namespace pinfer::quants {
const KQuantTileKernels* Avx2KQuantTileKernels() { return &kAvx2Set; }
}  // namespace pinfer::quants

#else  // not x86-64

#include "loaders/quants_tile.h"

namespace pinfer::quants {
const KQuantTileKernels* Avx2KQuantTileKernels() { return nullptr; }
}  // namespace pinfer::quants

#endif
