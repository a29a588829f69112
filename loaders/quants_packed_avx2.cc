// The AVX2 set of quants_packed.h's kernels: one 256-bit register holds 4 codes of each of a
// group's 8 rows (int32 lane i = row i), multiplied into a token's 4 activation codes broadcast
// to every lane. AVX2: vpmaddubsw (u8 x s8 pairs to int16) summed over the block in int16, then
// one vpmaddwd by ones to int32; AVX-VNNI (PINFER_AVXVNNI, quants_packed_avxvnni.cc includes
// this file): vpdpbusd into int32 lanes. Both give the exact integer block sums, so the floats
// (one vector fma per block and token: d_w[8] from F16C times d_a broadcast) are the scalar
// set's bit for bit. Tiles: 8 rows x 6 tokens (AVX-VNNI 4) of accumulators; tokens in chunks of
// 60 (64) so a chunk's activations stay in L2 while every group passes over them.
#ifndef PINFER_AVXVNNI
#define PINFER_AVXVNNI 0
#define PINFER_AVXVNNI_COMPILES 1
#endif
#if (defined(__x86_64__) || defined(_M_X64)) && PINFER_AVXVNNI_COMPILES
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "loaders/quants_packed.h"
#include "loaders/quants_q8a.h"
#include "loaders/x86_target_push.h"
// From here to the end of the vector code: compiled for the target above.
#include "loaders/x86_pin.h"

#if PINFER_AVXVNNI
#define PINFER_PACKED_NS packed_avxvnni
#define PINFER_PACKED_NAME "avxvnni"
#define PINFER_PACKED_ACCESSOR AvxVnniPackedQ8AKernels
#else
#define PINFER_PACKED_NS packed_avx2
#define PINFER_PACKED_NAME "avx2"
#define PINFER_PACKED_ACCESSOR Avx2PackedQ8AKernels
#endif

namespace pinfer::quants::PINFER_PACKED_NS {
namespace {

// The token and chunk loops fully unrolled at any optimization level: the per-token sums must
// live in registers (GCC 12 at -O2 keeps them in memory otherwise: 4-8 token tiles 2-4x slower).
#define PINFER_UNROLL _Pragma("GCC unroll 16")

// 8 rows x 6 tokens: 6 int16 (AVX2; VNNI int32) sums, 6 float accumulators, the chunk's two
// code vectors, the nibble mask and a broadcast: the 16 ymm registers. packed_bench 4096 x 4096 x
// 64 tokens, avx2, callgrind instructions per pass (Q4_0 / Q8_0): 4 tokens 166 M / 229 M, 5
// 162 M / 217 M, 6 159 M / 204 M (load 10, one core: Q4_0 141 -> 180 Gop/s at 6).
// AVX-VNNI keeps its 4 tokens (tuned on Zen 5, not measured here).
constexpr int kTokTile = PINFER_AVXVNNI ? 4 : 6;
// Tokens whose activations stay in L2 (n = 4096: 300 KiB of 512) while the groups pass.
constexpr int kTokChunk = PINFER_AVXVNNI ? 64 : 10 * kTokTile;

// Decode's software prefetch distance: the block about 2 KiB ahead of the one read (Q4_0 15
// blocks, Q8_0 8). packed_bench BM_PackedGemm/avx2/<fmt>/1/dram, one core, 3 alternated rounds
// of 3 (GB/s): Q4_0 none 11.9, 8 blocks 13.6, 16 15.2, 32 14.1; Q8_0 none 12.4, 8 blocks 14.4,
// 16 12.8, 32 12.9.
constexpr int64_t kAheadBytes = 2048;
template <typename Block>
constexpr int64_t kAheadBlocks = (kAheadBytes + sizeof(Block) - 1) / sizeof(Block);

// The 4 bytes at p in every 32-bit lane (a vpbroadcastd from memory, not through a GPR).
inline __m256i Bcast4(const int8_t* p) { return _mm256_broadcastd_epi32(_mm_loadu_si32(p)); }
// A block's activation sum in every lane (likewise from memory).
inline __m256i BcastSum(const BlockQ8A& a) {
  return _mm256_broadcastd_epi32(_mm_loadu_si32(&a.sum));
}

// The register pins (x86_pin.h's PinRegs) keep the NT per-token sums in registers,
// one chunk of codes at a time: unpinned, GCC 12 computes a block's 32 (NT = 4) products before
// adding any and spills them to the stack (packed_bench Q4_0 4096 x 4096 x 64 tokens, 4-token
// tiles: 203 M instructions per pass unpinned, 166 M pinned).

// A software prefetch issued alongside a group's pass: block b's step prefetches the block
// `offset` bytes past block b of `base` when it ends within `limit` bytes of base (base null:
// none). Offsets, not pointers, so that no pointer past the weights is ever formed.
struct Prefetch {
  const char* base = nullptr;
  int64_t offset = 0;
  int64_t limit = 0;
  bool l1 = false;  // into L1 (decode: read soon); else L2 (prefill: the next group)
};

// The exact int32 block sums of 8 rows (lanes) against NT tokens, and their float step; block
// b's step also issues pf's prefetch for block b.
template <GgmlType T, typename Block, int NT>
inline void GroupTile(const Block* g, int64_t nb, const BlockQ8A* const* a, Prefetch pf,
                      __m256* acc) {
  const __m256i low = _mm256_set1_epi8(0x0f);
  for (int64_t b = 0; b < nb; ++b) {
    if (pf.base != nullptr) {
      const int64_t at = pf.offset + b * static_cast<int64_t>(sizeof(Block));
      if (at + static_cast<int64_t>(sizeof(Block)) <= pf.limit) {
        const char* p = pf.base + at;
        for (int l = 0; l < static_cast<int>(sizeof(Block)); l += 64) {
          if (pf.l1) {
            _mm_prefetch(p + l, _MM_HINT_T0);
          } else {
            _mm_prefetch(p + l, _MM_HINT_T1);
          }
        }
      }
    }
    const Block& w = g[b];
    __m256i isum[NT];
    if constexpr (T == GgmlType::kQ8_0) {
#if PINFER_AVXVNNI
      // Codes stored + 128: u8 x s8 dots, less 128 * sum_a (exact).
      PINFER_UNROLL
      for (int t = 0; t < NT; ++t) isum[t] = _mm256_set1_epi32(-128 * a[t][b].sum);
      PINFER_UNROLL
      for (int c = 0; c < 8; ++c) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * c));
        PINFER_UNROLL
        for (int t = 0; t < NT; ++t)
          isum[t] = _mm256_dpbusd_avx_epi32(isum[t], v, Bcast4(a[t][b].qs + 4 * c));
      }
#else
      // The signed codes' magnitudes (<= 128) times the activations with the codes' signs:
      // a pair sums to at most 2 x 128 x 127 = 32512 in int16, then vpmaddwd to int32.
      const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
      const __m256i ones = _mm256_set1_epi16(1);
      PINFER_UNROLL
      for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
      PINFER_UNROLL
      for (int c = 0; c < 8; ++c) {
        const __m256i s = _mm256_xor_si256(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * c)), flip);
        const __m256i u = _mm256_sign_epi8(s, s);
        PINFER_UNROLL
        for (int t = 0; t < NT; ++t) {
          const __m256i p =
              _mm256_maddubs_epi16(u, _mm256_sign_epi8(Bcast4(a[t][b].qs + 4 * c), s));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, ones));
        }
        PinRegs(isum);
      }
#endif
    } else {
#if PINFER_AVXVNNI
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
          isum[t] = _mm256_dpbusd_avx_epi32(isum[t], lo, Bcast4(a[t][b].qs + 4 * c));
          isum[t] = _mm256_dpbusd_avx_epi32(isum[t], hi, Bcast4(a[t][b].qs + 16 + 4 * c));
        }
      }
#else
      // Codes 0..15 times |a| <= 127: the 8 maddubs of a block sum to at most
      // 8 x 2 x 15 x 127 = 30480 per int16 lane, exact; then one vpmaddwd to int32.
      __m256i p16[NT];
      PINFER_UNROLL
      for (int t = 0; t < NT; ++t) p16[t] = _mm256_setzero_si256();
      PINFER_UNROLL
      for (int c = 0; c < 4; ++c) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * c));
        const __m256i lo = _mm256_and_si256(v, low);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
        PINFER_UNROLL
        for (int t = 0; t < NT; ++t) {
          p16[t] = _mm256_add_epi16(p16[t], _mm256_maddubs_epi16(lo, Bcast4(a[t][b].qs + 4 * c)));
          p16[t] =
              _mm256_add_epi16(p16[t], _mm256_maddubs_epi16(hi, Bcast4(a[t][b].qs + 16 + 4 * c)));
        }
        PinRegs(p16);
      }
      const __m256i ones = _mm256_set1_epi16(1);
      PINFER_UNROLL
      for (int t = 0; t < NT; ++t) {
        isum[t] = _mm256_madd_epi16(p16[t], ones);
        if constexpr (T == GgmlType::kQ4_0) {  // 8 * sum_a as a vector shift of the broadcast
          isum[t] = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(BcastSum(a[t][b]), 3));
        }
      }
#endif
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.d)));
    PINFER_UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m256 da = _mm256_set1_ps(a[t][b].d);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(isum[t]), acc[t]);
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
}

template <GgmlType T, typename Block, int NT>
inline void Tile(const Block* g, int64_t nb, int rows, const uint8_t* acts, int64_t act_row_bytes,
                 Prefetch next, float* y, int64_t y_row_stride) {
  const BlockQ8A* a[NT];
  PINFER_UNROLL
  for (int t = 0; t < NT; ++t) a[t] = reinterpret_cast<const BlockQ8A*>(acts + t * act_row_bytes);
  __m256 acc[NT];
  PINFER_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  GroupTile<T, Block, NT>(g, nb, a, next, acc);
  PINFER_UNROLL
  for (int t = 0; t < NT; ++t) {
    if (rows == kPackRows) {
      _mm256_storeu_ps(y + t * y_row_stride, acc[t]);
    } else {
      alignas(32) float v[kPackRows];
      _mm256_store_ps(v, acc[t]);
      for (int i = 0; i < rows; ++i) y[t * y_row_stride + i] = v[i];
    }
  }
}

// The last 1..kTokTile-1 tokens of a chunk: Tile<..., left>.
template <GgmlType T, typename Block, int... I>
inline void LeftTile(int left, const Block* g, int64_t nb, int rows, const uint8_t* acts,
                     int64_t act_row_bytes, Prefetch next, float* y, int64_t y_row_stride,
                     std::integer_sequence<int, I...>) {
  using Fn =
      void (*)(const Block*, int64_t, int, const uint8_t*, int64_t, Prefetch, float*, int64_t);
  static constexpr Fn kFns[] = {Tile<T, Block, I + 1>...};
  kFns[left - 1](g, nb, rows, acts, act_row_bytes, next, y, y_row_stride);
}

template <GgmlType T, typename Block>
void PackedDot(const void* w, int64_t n_rows, const void* acts, int64_t act_row_bytes, int n_tok,
               int64_t n, float* y, int64_t y_row_stride) {
  const int64_t nb = n / kQK8A;
  const int64_t groups = (n_rows + kPackRows - 1) / kPackRows;
  const auto* gw = static_cast<const Block*>(w);
  const auto* ab = static_cast<const uint8_t*>(acts);
  for (int t0 = 0; t0 < n_tok; t0 += kTokChunk) {
    const int t1 = std::min(n_tok, t0 + kTokChunk);
    for (int64_t g = 0; g < groups; ++g) {
      const int rows = static_cast<int>(std::min<int64_t>(kPackRows, n_rows - g * kPackRows));
      float* yg = y + g * kPackRows;
      const Block* wg = gw + g * nb;
      // The first tile prefetches: when this group takes several passes (prefill), the next
      // group, spread over its blocks, so that DRAM stream overlaps this group's other tiles;
      // when one pass (decode), kAheadBlocks ahead of the block it reads, on into the next
      // groups of the call.
      const auto* gc = reinterpret_cast<const char*>(wg);
      const int64_t group_bytes = nb * static_cast<int64_t>(sizeof(Block));
      const Prefetch next =
          t1 - t0 > kTokTile
              ? Prefetch{gc, group_bytes, g + 1 < groups ? 2 * group_bytes : 0, false}
              : Prefetch{gc, kAheadBlocks<Block> * static_cast<int64_t>(sizeof(Block)),
                         (groups - g) * group_bytes, true};
      int t = t0;
      for (; t + kTokTile <= t1; t += kTokTile) {
        Tile<T, Block, kTokTile>(wg, nb, rows, ab + t * act_row_bytes, act_row_bytes,
                                 t == t0 ? next : Prefetch{}, yg + t * y_row_stride, y_row_stride);
      }
      const int left = t1 - t;
      const uint8_t* at = ab + t * act_row_bytes;
      float* yt = yg + t * y_row_stride;
      if (left > 0) {
        LeftTile<T, Block>(left, wg, nb, rows, at, act_row_bytes, t == t0 ? next : Prefetch{}, yt,
                           y_row_stride, std::make_integer_sequence<int, kTokTile - 1>());
      }
    }
  }
}

constexpr PackedQ8AKernels kSet = {PINFER_PACKED_NAME, PackedDot<GgmlType::kQ4_0, BlockQ4_0x8>,
                                   PackedDot<GgmlType::kQ4_1, BlockQ4_1x8>,
                                   PackedDot<GgmlType::kQ8_0, BlockQ8_0x8>};

}  // namespace
}  // namespace pinfer::quants::PINFER_PACKED_NS

namespace pinfer::quants {
const PackedQ8AKernels* PINFER_PACKED_ACCESSOR() { return &PINFER_PACKED_NS::kSet; }
}  // namespace pinfer::quants

#include "loaders/x86_target_pop.h"

#else  // not x86-64 (or no AVX-VNNI in this compiler)

#include "loaders/quants_packed.h"

namespace pinfer::quants {
#if PINFER_AVXVNNI
const PackedQ8AKernels* AvxVnniPackedQ8AKernels() { return nullptr; }
#else
const PackedQ8AKernels* Avx2PackedQ8AKernels() { return nullptr; }
#endif
}  // namespace pinfer::quants

#endif
