// The AVX-512 VNNI set (kernel_set.h's avx512vnni) of quants_packed.h's kernels: one 512-bit
// register holds 4 codes of each of 16 rows (two consecutive 8-row groups, int32 lane = row),
// multiplied by vpdpbusd into a token's 4 activation codes broadcast to every lane. The int32
// block sums are exact (Q4_0: nibbles less 8 * sum_a; Q8_0: the stored code + 128, less
// 128 * sum_a), then one vector fma per block and token (d_w[16] from F16C times d_a), so the
// floats are the scalar set's bit for bit. Tiles: 16 rows x 8 tokens of accumulators; tokens in
// chunks of 64 so a chunk's activations stay in L2 while every group pair passes over them.
// Decode (1 or 2 tokens) streams one 8-row group at a time with 256-bit vpdpbusd (GroupTile).
// Null where the compiler has no AVX-512 VNNI or off x86-64; kernel_set.cc checks the CPU
// (cpuid and the OS's ZMM state) before the set is used.
#if (defined(__x86_64__) || defined(_M_X64)) &&      \
    ((defined(__clang__) && __clang_major__ >= 8) || \
     (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 9))
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "loaders/quants_packed.h"
#include "loaders/quants_q8a.h"

#if defined(__clang__)
#pragma clang attribute push(                                                      \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), \
    apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unmasked builtins' pass-through,
// which -Wmaybe-uninitialized reports at every inlined call (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace pinfer::quants::packed_avx512vnni {
namespace {

// The token and chunk loops fully unrolled at any optimization level: the per-token sums must
// live in registers (GCC 12 at -O2 keeps them in memory otherwise: 4-8 token tiles 2-4x slower).
#define PINFER_UNROLL _Pragma("GCC unroll 16")

constexpr int kTokTile = 8;    // tokens per register tile
constexpr int kTokChunk = 64;  // tokens whose activations stay in L2 while the groups pass

inline __m512i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline __m256i Bcast4y(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// 32 bytes at offset off of block b in both groups: the low half rows 0..7, the high half 8..15.
inline __m512i Load2(const uint8_t* p0, const uint8_t* p1) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1)), 1);
}

inline __m512 Half2(const uint16_t* p0, const uint16_t* p1) {
  return _mm512_cvtph_ps(_mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1)), 1));
}

// 16 rows (groups g0, g1) x NT tokens: acc[t] lane r = the pair's float accumulator.
template <GgmlType T, typename Block, int NT>
inline void PairTile(const Block* g0, const Block* g1, int64_t nb, const BlockQ8A* const* a,
                     const char* next, __m512* acc) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < nb; ++b) {
    const Block& w0 = g0[b];
    const Block& w1 = g1[b];
    if (next != nullptr) {  // the next pair's bytes, spread over this pass's blocks, into L2
      for (int l = 0; l < static_cast<int>(2 * sizeof(Block)); l += 64)
        _mm_prefetch(next + b * static_cast<int64_t>(2 * sizeof(Block)) + l, _MM_HINT_T1);
    }
    __m512i isum[NT];
    if constexpr (T == GgmlType::kQ8_0) {
      PINFER_UNROLL
      for (int t = 0; t < NT; ++t) isum[t] = _mm512_set1_epi32(-128 * a[t][b].sum);
      PINFER_UNROLL
      for (int c = 0; c < 8; ++c) {
        const __m512i v = Load2(w0.qs + 32 * c, w1.qs + 32 * c);
        PINFER_UNROLL
        for (int t = 0; t < NT; ++t)
          isum[t] = _mm512_dpbusd_epi32(isum[t], v, Bcast4(a[t][b].qs + 4 * c));
      }
    } else {
      PINFER_UNROLL
      for (int t = 0; t < NT; ++t) {
        isum[t] =
            T == GgmlType::kQ4_0 ? _mm512_set1_epi32(-8 * a[t][b].sum) : _mm512_setzero_si512();
      }
      PINFER_UNROLL
      for (int c = 0; c < 4; ++c) {
        const __m512i v = Load2(w0.qs + 32 * c, w1.qs + 32 * c);
        const __m512i lo = _mm512_and_si512(v, low);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
        PINFER_UNROLL
        for (int t = 0; t < NT; ++t) {
          isum[t] = _mm512_dpbusd_epi32(isum[t], lo, Bcast4(a[t][b].qs + 4 * c));
          isum[t] = _mm512_dpbusd_epi32(isum[t], hi, Bcast4(a[t][b].qs + 16 + 4 * c));
        }
      }
    }
    const __m512 dw = Half2(w0.d, w1.d);
    PINFER_UNROLL
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(a[t][b].d)),
                               _mm512_cvtepi32_ps(isum[t]), acc[t]);
    }
    if constexpr (T == GgmlType::kQ4_1) {
      const __m512 mw = Half2(w0.m, w1.m);
      PINFER_UNROLL
      for (int t = 0; t < NT; ++t) {
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(mw, _mm512_set1_ps(a[t][b].d)),
                                 _mm512_set1_ps(static_cast<float>(a[t][b].sum)), acc[t]);
      }
    }
  }
}

// One group (8 rows, 256-bit EVEX vpdpbusd) against NT tokens: the decode path (1 or 2 tokens),
// which streams the groups one after the other. Measured on a 75 MB Q4_0 matrix (past L3), one
// thread: 1 token 48 GB/s this way against 31 GB/s for the 16-row pairs (whose two streams
// read slower from DRAM), 2 tokens 37 against 30; from 4 tokens on the pairs are faster.
template <GgmlType T, typename Block, int NT>
inline void GroupTile(const Block* g, int64_t nb, int rows, const uint8_t* acts,
                      int64_t act_row_bytes, float* y, int64_t y_row_stride) {
  const BlockQ8A* a[NT];
  PINFER_UNROLL
  for (int t = 0; t < NT; ++t) a[t] = reinterpret_cast<const BlockQ8A*>(acts + t * act_row_bytes);
  const __m256i low = _mm256_set1_epi8(0x0f);
  __m256 acc[NT];
  PINFER_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Block& w = g[b];
    __m256i isum[NT];
    if constexpr (T == GgmlType::kQ8_0) {
      PINFER_UNROLL
      for (int t = 0; t < NT; ++t) isum[t] = _mm256_set1_epi32(-128 * a[t][b].sum);
      PINFER_UNROLL
      for (int c = 0; c < 8; ++c) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * c));
        PINFER_UNROLL
        for (int t = 0; t < NT; ++t)
          isum[t] = _mm256_dpbusd_epi32(isum[t], v, Bcast4y(a[t][b].qs + 4 * c));
      }
    } else {
      PINFER_UNROLL
      for (int t = 0; t < NT; ++t) {
        isum[t] =
            T == GgmlType::kQ4_0 ? _mm256_set1_epi32(-8 * a[t][b].sum) : _mm256_setzero_si256();
      }
      PINFER_UNROLL
      for (int c = 0; c < 4; ++c) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * c));
        const __m256i lo = _mm256_and_si256(v, low);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
        PINFER_UNROLL
        for (int t = 0; t < NT; ++t) {
          isum[t] = _mm256_dpbusd_epi32(isum[t], lo, Bcast4y(a[t][b].qs + 4 * c));
          isum[t] = _mm256_dpbusd_epi32(isum[t], hi, Bcast4y(a[t][b].qs + 16 + 4 * c));
        }
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.d)));
    PINFER_UNROLL
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a[t][b].d)),
                               _mm256_cvtepi32_ps(isum[t]), acc[t]);
    }
    if constexpr (T == GgmlType::kQ4_1) {
      const __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.m)));
      PINFER_UNROLL
      for (int t = 0; t < NT; ++t) {
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(mw, _mm256_set1_ps(a[t][b].d)),
                                 _mm256_set1_ps(static_cast<float>(a[t][b].sum)), acc[t]);
      }
    }
  }
  const __mmask8 mask = static_cast<__mmask8>((1u << rows) - 1);
  PINFER_UNROLL
  for (int t = 0; t < NT; ++t) _mm256_mask_storeu_ps(y + t * y_row_stride, mask, acc[t]);
}

template <GgmlType T, typename Block, int NT>
inline void Tile(const Block* g0, const Block* g1, int64_t nb, int rows, const uint8_t* acts,
                 int64_t act_row_bytes, const char* next, float* y, int64_t y_row_stride) {
  const BlockQ8A* a[NT];
  PINFER_UNROLL
  for (int t = 0; t < NT; ++t) a[t] = reinterpret_cast<const BlockQ8A*>(acts + t * act_row_bytes);
  __m512 acc[NT];
  PINFER_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  PairTile<T, Block, NT>(g0, g1, nb, a, next, acc);
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  PINFER_UNROLL
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * y_row_stride, mask, acc[t]);
}

// The pair's tiles of n tokens; the first one also prefetches `next` (the next pair's bytes,
// null: none), which the DRAM stream then overlaps with this pair's other tiles.
template <GgmlType T, typename Block, int NT>
inline void TileRun(const Block* g0, const Block* g1, int64_t nb, int rows, const uint8_t* acts,
                    int64_t act_row_bytes, int n, const char* next, float* y,
                    int64_t y_row_stride) {
  int t = 0;
  for (; t + NT <= n; t += NT, next = nullptr)
    Tile<T, Block, NT>(g0, g1, nb, rows, acts + t * act_row_bytes, act_row_bytes, next,
                       y + t * y_row_stride, y_row_stride);
  if constexpr (NT > 1) {
    if (t < n)
      TileRun<T, Block, NT / 2>(g0, g1, nb, rows, acts + t * act_row_bytes, act_row_bytes, n - t,
                                next, y + t * y_row_stride, y_row_stride);
  }
}

// One group's tiles of n tokens (8, then 4, 2, 1 at the end).
template <GgmlType T, typename Block>
inline void GroupRun(const Block* g, int64_t nb, int rows, const uint8_t* acts,
                     int64_t act_row_bytes, int n, float* y, int64_t y_row_stride) {
  int t = 0;
  for (; t + 8 <= n; t += 8)
    GroupTile<T, Block, 8>(g, nb, rows, acts + t * act_row_bytes, act_row_bytes,
                           y + t * y_row_stride, y_row_stride);
  for (; t + 4 <= n; t += 4)
    GroupTile<T, Block, 4>(g, nb, rows, acts + t * act_row_bytes, act_row_bytes,
                           y + t * y_row_stride, y_row_stride);
  for (; t + 2 <= n; t += 2)
    GroupTile<T, Block, 2>(g, nb, rows, acts + t * act_row_bytes, act_row_bytes,
                           y + t * y_row_stride, y_row_stride);
  for (; t < n; ++t)
    GroupTile<T, Block, 1>(g, nb, rows, acts + t * act_row_bytes, act_row_bytes,
                           y + t * y_row_stride, y_row_stride);
}

template <GgmlType T, typename Block>
void PackedDot(const void* w, int64_t n_rows, const void* acts, int64_t act_row_bytes, int n_tok,
               int64_t n, float* y, int64_t y_row_stride) {
  const int64_t nb = n / kQK8A;
  const int64_t groups = (n_rows + kPackRows - 1) / kPackRows;
  const auto* gw = static_cast<const Block*>(w);
  const auto* ab = static_cast<const uint8_t*>(acts);
  if (n_tok <= 2) {  // decode: one group at a time (see GroupTile)
    for (int64_t g = 0; g < groups; ++g) {
      const int rows = static_cast<int>(std::min<int64_t>(kPackRows, n_rows - g * kPackRows));
      if (n_tok == 1) {
        GroupTile<T, Block, 1>(gw + g * nb, nb, rows, ab, act_row_bytes, y + g * kPackRows,
                               y_row_stride);
      } else {
        GroupTile<T, Block, 2>(gw + g * nb, nb, rows, ab, act_row_bytes, y + g * kPackRows,
                               y_row_stride);
      }
    }
    return;
  }
  for (int t0 = 0; t0 < n_tok; t0 += kTokChunk) {
    const int nt = std::min(n_tok - t0, kTokChunk);
    for (int64_t g = 0; g < groups; g += 2) {
      const Block* g0 = gw + g * nb;
      if (g + 1 == groups) {  // an odd last group: 8 rows at a time in 256-bit registers
        GroupRun<T, Block>(g0, nb, static_cast<int>(n_rows - g * kPackRows),
                           ab + t0 * act_row_bytes, act_row_bytes, nt,
                           y + t0 * y_row_stride + g * kPackRows, y_row_stride);
        break;
      }
      const Block* g1 = g0 + nb;
      const int rows = static_cast<int>(std::min<int64_t>(2 * kPackRows, n_rows - g * kPackRows));
      const char* next =
          g + 2 < groups ? reinterpret_cast<const char*>(gw + (g + 2) * nb) : nullptr;
      TileRun<T, Block, kTokTile>(g0, g1, nb, rows, ab + t0 * act_row_bytes, act_row_bytes, nt,
                                  next, y + t0 * y_row_stride + g * kPackRows, y_row_stride);
    }
  }
}

constexpr PackedQ8AKernels kSet = {"avx512vnni", PackedDot<GgmlType::kQ4_0, BlockQ4_0x8>,
                                   PackedDot<GgmlType::kQ4_1, BlockQ4_1x8>,
                                   PackedDot<GgmlType::kQ8_0, BlockQ8_0x8>};

}  // namespace
}  // namespace pinfer::quants::packed_avx512vnni

namespace pinfer::quants {
const PackedQ8AKernels* Avx512VnniPackedQ8AKernels() { return &packed_avx512vnni::kSet; }
}  // namespace pinfer::quants

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

#else  // not x86-64, or no AVX-512 VNNI in this compiler

#include "loaders/quants_packed.h"

namespace pinfer::quants {
const PackedQ8AKernels* Avx512VnniPackedQ8AKernels() { return nullptr; }
}  // namespace pinfer::quants

#endif
