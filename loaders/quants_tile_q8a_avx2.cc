// The AVX2 tiles of the 32-value weight formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
// against Q8A activations (quants_q8a.h's contract and float order): up to R
// weight rows x T tokens, each pair's eight float lane accumulators in one
// register. Per weight block, each row's 32 codes are decoded once and
// multiplied into each token's activation codes (vpmaddubsw, vpmaddwd by ones:
// the header's lane sums i_l), s_b = d_w * d_a comes lane by lane from the
// broadcast row and token scales, acc = fma(s_b, float(i), acc) as the header
// fixes it; the offset terms of the tile's pairs run as the lanes of one vector
// (pair p = T * r + t in lane p). At the end each pair's lanes are added in the
// header's order, then its offset term: bit for bit the row kernels' values.
//
// Cache blocking as quants_tile_avx2.cc: chunks of tokens whose activations fit
// in 256 KiB, each R weight rows meeting every T-token group of the chunk in
// turn.
// PINFER_AVXVNNI: 1 when quants_*_avxvnni.cc includes this file to build the same kernels for
// the AVX-VNNI set (one vpdpbusd per u8 x s8 dot, see DotU8S8); 0 for the AVX2 set.
#ifndef PINFER_AVXVNNI
#define PINFER_AVXVNNI 0
#define PINFER_AVXVNNI_COMPILES 1
#endif
#if (defined(__x86_64__) || defined(_M_X64)) && PINFER_AVXVNNI_COMPILES
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "loaders/quants.h"
#include "loaders/quants_internal.h"
#include "loaders/quants_q8a.h"
#include "loaders/quants_tile.h"

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

namespace pinfer::quants {
namespace {

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

// 2 x 4: 8 float accumulator vectors. Measured on gemm_bench's 4096 x 4096 x
// 512-token problem (one Zen 4 core, AVX2): Q4_0 89 GOP/s (1 x 4: 86, 2 x 3:
// 87, 2 x 2: 76; the row kernel 67), Q8_0 106 (1 x 4 to 2 x 3: 109-113; the row
// kernel 103, which has little decoding to share).
constexpr int kTileRows = 2, kTileTokens = 4;
static_assert(kTileRows <= 2 && kTileTokens <= 4, "the offset terms: lane 4 * row + token");
constexpr int64_t kChunkBytes = 256 << 10;  // a token chunk's activations
constexpr int64_t kActBlock = sizeof(BlockQ8A);

// The offset term's kind (quants_q8a.h): none (Q8_0), a multiple of s_b (Q4_0
// -8, Q5_0 -16), m_w * d_a (Q4_1, Q5_1).
enum class Offset { kNone, kScaled, kMin };

template <GgmlType T>
struct Format;
template <>
struct Format<GgmlType::kQ4_0> {
  using Block = BlockQ4_0;
  static constexpr Offset kOffset = Offset::kScaled;
  static constexpr float kShift = -8.0f;
};
template <>
struct Format<GgmlType::kQ4_1> {
  using Block = BlockQ4_1;
  static constexpr Offset kOffset = Offset::kMin;
  static constexpr float kShift = 0.0f;
};
template <>
struct Format<GgmlType::kQ5_0> {
  using Block = BlockQ5_0;
  static constexpr Offset kOffset = Offset::kScaled;
  static constexpr float kShift = -16.0f;
};
template <>
struct Format<GgmlType::kQ5_1> {
  using Block = BlockQ5_1;
  static constexpr Offset kOffset = Offset::kMin;
  static constexpr float kShift = 0.0f;
};
template <>
struct Format<GgmlType::kQ8_0> {
  using Block = BlockQ8_0;
  static constexpr Offset kOffset = Offset::kNone;
  static constexpr float kShift = 0.0f;
};

// One weight block: unsigned codes q (Q8_0: |q|, with its signed codes in sgn),
// d_w, m_w.
struct Codes {
  __m256i q, sgn;
  float d, m;
};

template <GgmlType T>
inline Codes Decode(const uint8_t* blk) {
  using Block = typename Format<T>::Block;
  Codes c{};
  const auto* b = reinterpret_cast<const Block*>(blk);
  c.d = simd::HalfToFloat(b->d);
  if constexpr (T == GgmlType::kQ8_0) {
    c.sgn = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
    c.q = _mm256_abs_epi8(c.sgn);
  } else {
    c.q = simd::Nibbles16(b->qs);
    if constexpr (T == GgmlType::kQ5_0 || T == GgmlType::kQ5_1)
      c.q = _mm256_or_si256(c.q, simd::FifthBits(b->qh));
    if constexpr (T == GgmlType::kQ4_1 || T == GgmlType::kQ5_1) c.m = simd::HalfToFloat(b->m);
  }
  return c;
}

// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)): the header's order.
inline float LaneSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// R rows (w + r * w_row_bytes) x T tokens (act + t * act_row_bytes), nb blocks
// each.
template <GgmlType Ty, int R, int T>
void Tile(const uint8_t* w, int64_t w_row_bytes, const uint8_t* act, int64_t act_row_bytes,
          int64_t nb, float* y, int64_t y_row_stride) {
  using F = Format<Ty>;
  constexpr int64_t kBlock = sizeof(typename F::Block);
  __m256 acc[R * T];
  for (int p = 0; p < R * T; ++p) acc[p] = _mm256_setzero_ps();
  __m256 corr = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    Codes c[R];
    __m256 d_w[R];
    for (int r = 0; r < R; ++r) {
      c[r] = Decode<Ty>(w + r * w_row_bytes + b * kBlock);
      d_w[r] = _mm256_set1_ps(c[r].d);
    }
    const BlockQ8A* ab[kTileTokens];
    for (int t = 0; t < kTileTokens; ++t) {
      ab[t] =
          reinterpret_cast<const BlockQ8A*>(act + (t < T ? t : 0) * act_row_bytes + b * kActBlock);
    }
    for (int t = 0; t < T; ++t) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab[t]->qs));
      const __m256 d_a = _mm256_broadcast_ss(&ab[t]->d);
      for (int r = 0; r < R; ++r) {
        const __m256i a = Ty == GgmlType::kQ8_0 ? _mm256_sign_epi8(av, c[r].sgn) : av;
        const __m256i lanes = DotU8S8(c[r].q, a);
        acc[T * r + t] =
            _mm256_fmadd_ps(_mm256_mul_ps(d_w[r], d_a), _mm256_cvtepi32_ps(lanes), acc[T * r + t]);
      }
    }
    if constexpr (F::kOffset != Offset::kNone) {
      // Lane 4r + t: row r's and token t's factors (lanes of absent rows and
      // tokens: zero).
      const __m128 da4 = _mm_setr_ps(ab[0]->d, T > 1 ? ab[1]->d : 0.0f, T > 2 ? ab[2]->d : 0.0f,
                                     T > 3 ? ab[3]->d : 0.0f);
      const __m128 sum4 = _mm_cvtepi32_ps(_mm_setr_epi32(
          ab[0]->sum, T > 1 ? ab[1]->sum : 0, T > 2 ? ab[2]->sum : 0, T > 3 ? ab[3]->sum : 0));
      const __m256 d_a = _mm256_set_m128(da4, da4), sum = _mm256_set_m128(sum4, sum4);
      if constexpr (F::kOffset == Offset::kScaled) {  // corr = fma(shift * s_b, sum_a, corr)
        const __m256 dw =
            _mm256_set_m128(_mm_set1_ps(R > 1 ? c[R - 1].d : 0.0f), _mm_set1_ps(c[0].d));
        const __m256 s = _mm256_mul_ps(dw, d_a);
        corr = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(F::kShift), s), sum, corr);
      } else {  // corr = fma(m_w * d_a, sum_a, corr)
        const __m256 m =
            _mm256_set_m128(_mm_set1_ps(R > 1 ? c[R - 1].m : 0.0f), _mm_set1_ps(c[0].m));
        corr = _mm256_fmadd_ps(_mm256_mul_ps(m, d_a), sum, corr);
      }
    }
  }
  alignas(32) float offset[8];
  _mm256_store_ps(offset, corr);
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t)
      y[t * y_row_stride + r] = LaneSum(acc[T * r + t]) + offset[4 * r + t];
  }
}

using TileFn = void (*)(const uint8_t*, int64_t, const uint8_t*, int64_t, int64_t, float*, int64_t);

template <GgmlType Ty, int R, std::size_t... T>
constexpr std::array<TileFn, kTileTokens> TokenTiles(std::index_sequence<T...>) {
  return {Tile<Ty, R, static_cast<int>(T) + 1>...};
}
template <GgmlType Ty, std::size_t... R>
constexpr std::array<std::array<TileFn, kTileTokens>, kTileRows> AllTiles(
    std::index_sequence<R...>) {
  return {TokenTiles<Ty, static_cast<int>(R) + 1>(std::make_index_sequence<kTileTokens>())...};
}
// kTiles<Ty>[r - 1][t - 1]: the r x t tile.
template <GgmlType Ty>
constexpr auto kTiles = AllTiles<Ty>(std::make_index_sequence<kTileRows>());

template <GgmlType Ty>
void TileDot(const void* w, int64_t w_row_bytes, int n_rows, const void* acts,
             int64_t act_row_bytes, int n_tok, int64_t n, float* y, int64_t y_row_stride) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(acts);
  const int64_t nb = n / kQK8A;
  const int chunk = static_cast<int>(std::max<int64_t>(
      kTileTokens, kChunkBytes / std::max<int64_t>(act_row_bytes, 1) / kTileTokens * kTileTokens));
  for (int c0 = 0; c0 < n_tok; c0 += chunk) {
    const int c1 = std::min(n_tok, c0 + chunk);
    for (int r0 = 0; r0 < n_rows; r0 += kTileRows) {
      const int nr = std::min(kTileRows, n_rows - r0);
      const uint8_t* rows = wb + r0 * w_row_bytes;
      for (int t0 = c0; t0 < c1; t0 += kTileTokens) {
        const int nt = std::min(kTileTokens, c1 - t0);
        kTiles<Ty>[nr - 1][nt - 1](rows, w_row_bytes, ab + t0 * act_row_bytes, act_row_bytes, nb,
                                   y + t0 * y_row_stride + r0, y_row_stride);
      }
    }
  }
}

constexpr Q8ATileKernels kAvx2Set{PINFER_AVXVNNI ? "avxvnni" : "avx2",
                                  TileDot<GgmlType::kQ4_0>,
                                  TileDot<GgmlType::kQ4_1>,
                                  TileDot<GgmlType::kQ5_0>,
                                  TileDot<GgmlType::kQ5_1>,
                                  TileDot<GgmlType::kQ8_0>};

}  // namespace
}  // namespace pinfer::quants

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

namespace pinfer::quants {
#if PINFER_AVXVNNI
const Q8ATileKernels* AvxVnniQ8ATileKernels() { return &kAvx2Set; }
#else
const Q8ATileKernels* Avx2Q8ATileKernels() { return &kAvx2Set; }
#endif
}  // namespace pinfer::quants

#else  // not x86-64 (or no AVX-VNNI in this compiler)

#include "loaders/quants_tile.h"

namespace pinfer::quants {
#if PINFER_AVXVNNI
const Q8ATileKernels* AvxVnniQ8ATileKernels() { return nullptr; }
#else
const Q8ATileKernels* Avx2Q8ATileKernels() { return nullptr; }
#endif
}  // namespace pinfer::quants

#endif
