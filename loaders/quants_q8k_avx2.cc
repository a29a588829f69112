// The AVX2 set of quants_q8k.h: Q8_K activations and the Q4_K / Q5_K / Q6_K row dot products
// with 8-bit integer multiplies (vpmaddubsw of the unsigned weight codes by the signed
// activations, vpmaddwd by the sub-block scales), computing the contract's floats exactly.
//
// Up to 4 tokens (decode): each weight block is decoded in registers as the dot consumes it and
// every token takes each decoded vector. More tokens: each block is decoded once per pass of up
// to 512 tokens into 8 vectors of 32 unsigned codes and their int16 scale vectors, which the
// pass's tokens then take four at a time. Either way a token's int32 sums stay in registers,
// four tokens' sums are reduced together, and their float steps run as the four lanes of one
// fused multiply-add: the scalar reference's std::fma, lane by lane, so the sets agree bit for
// bit and the two paths do too (batch invariance).
//
// Only the functions below the target pragma use AVX2 (compiled for it whatever the build's
// -march); the includes above it and the table accessor at the end are compiled for the build's
// baseline, so no inline function is shared between AVX2 and baseline code and a CPU without
// AVX2 can call Avx2KQuantKernels() (the caller checks cpuid before calling the kernels).
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "loaders/quants_q8k.h"
#include "loaders/x86_target_push.h"
// The vector code from here to x86_target_pop.h: compiled for AVX2 + FMA + F16C.
#include "loaders/quants_q8k_avx2_blocks.h"

namespace pinfer::quants {
namespace {

using namespace q8k_avx2;  // NOLINT: the block decoders, shared with quants_tile_avx2.cc

constexpr int kPass = 512;  // tokens per pass over the weight row (their float accumulators)

// The totals of four vectors of 8 int32 lanes, vector t in lane t.
inline __m128i Sum4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

// The total of one vector's 8 int32 lanes, in every lane.
inline __m128i Sum1(__m256i v) {
  __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4e));
  return _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xb1));
}

// NT (1..4) tokens' steps over one weight block: a[t] points at token t's activation block,
// lane t of acc is its float accumulator (lanes past NT carry nothing of use).
template <bool kQ6, int NT, typename W>
inline __m128 Dot(const W& w, const uint8_t* const (&a)[4], __m128 acc) {
  __m256i sumi[4], side[4];
  for (int t = 0; t < 4; ++t) sumi[t] = side[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m256i q = w.Q(k), scale = w.Scale(k);
    for (int t = 0; t < NT; ++t) {
      const __m256i p = _mm256_maddubs_epi16(q, Load(a[t] + kQsOffset + 32 * k));
      sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, scale));
    }
  }
  const __m256i w_side = w.Side();
  for (int t = 0; t < NT; ++t) side[t] = _mm256_madd_epi16(Load(a[t] + kBsumsOffset), w_side);
  const __m128 d_a = _mm_setr_ps(ScaleOf(a[0]), NT > 1 ? ScaleOf(a[1]) : 0.0f,
                                 NT > 2 ? ScaleOf(a[2]) : 0.0f, NT > 3 ? ScaleOf(a[3]) : 0.0f);
  if constexpr (kQ6) {  // sumi - 32 * sum_j sc[j] * bsums[j]
    for (int t = 0; t < NT; ++t) sumi[t] = _mm256_sub_epi32(sumi[t], _mm256_slli_epi32(side[t], 5));
    const __m128i total = NT == 1 ? Sum1(sumi[0]) : Sum4(sumi[0], sumi[1], sumi[2], sumi[3]);
    return _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(w.d), d_a), _mm_cvtepi32_ps(total), acc);
  } else {
    __m128i total, mins;
    if constexpr (NT <= 2) {  // lanes: the sums of tokens 0, 1, then their min terms
      total = Sum4(sumi[0], sumi[1], side[0], side[1]);
      mins = _mm_unpackhi_epi64(total, total);
    } else {
      total = Sum4(sumi[0], sumi[1], sumi[2], sumi[3]);
      mins = Sum4(side[0], side[1], side[2], side[3]);
    }
    acc = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(w.d), d_a), _mm_cvtepi32_ps(total), acc);
    return _mm_fnmadd_ps(_mm_mul_ps(_mm_set1_ps(w.dmin), d_a), _mm_cvtepi32_ps(mins), acc);
  }
}

// Up to 4 tokens: the weights decoded in registers as the dot uses them, the accumulators in
// one register.
template <typename Block, int NT>
void RowDotFew(const Block* w, const uint8_t* act, int64_t act_row_bytes, int64_t nb, float* y,
               int64_t y_stride) {
  constexpr bool kQ6 = sizeof(Block) == sizeof(BlockQ6_K);
  __m128 acc = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* a[4];
    for (int t = 0; t < 4; ++t) a[t] = act + (t < NT ? t : 0) * act_row_bytes + i * kActBlock;
    acc = Dot<kQ6, NT>(typename RegOf<Block>::Type(w[i]), a, acc);
  }
  alignas(16) float out[4];
  _mm_store_ps(out, acc);
  for (int t = 0; t < NT; ++t) y[t * y_stride] = out[t];
}

template <typename Block>
void RowDot(const void* w_row, const void* acts, int64_t act_row_bytes, int n_tok, int64_t n,
            float* y, int64_t y_stride) {
  constexpr bool kQ6 = sizeof(Block) == sizeof(BlockQ6_K);
  const auto* w = static_cast<const Block*>(w_row);
  const auto* act = static_cast<const uint8_t*>(acts);
  const int64_t nb = n / kQK_K;
  switch (n_tok) {
    case 1:
      return RowDotFew<Block, 1>(w, act, act_row_bytes, nb, y, y_stride);
    case 2:
      return RowDotFew<Block, 2>(w, act, act_row_bytes, nb, y, y_stride);
    case 3:
      return RowDotFew<Block, 3>(w, act, act_row_bytes, nb, y, y_stride);
    case 4:
      return RowDotFew<Block, 4>(w, act, act_row_bytes, nb, y, y_stride);
    default:
      break;
  }
  // More: each block decoded once per pass into Decoded, then taken by the pass's tokens four
  // at a time, their accumulators in memory.
  alignas(32) float acc[kPass + 4];
  Decoded dec;
  for (int p0 = 0; p0 < n_tok; p0 += kPass) {
    const int np = n_tok - p0 < kPass ? n_tok - p0 : kPass;
    for (int t = 0; t < np; ++t) acc[t] = 0.0f;
    const uint8_t* pass = act + p0 * act_row_bytes;
    for (int64_t i = 0; i < nb; ++i) {
      dec.From(typename RegOf<Block>::Type(w[i]));
      const uint8_t* block = pass + i * kActBlock;
      for (int t0 = 0; t0 < np; t0 += 4) {
        const uint8_t* a[4];
        for (int t = 0; t < 4; ++t) a[t] = block + (t0 + (t < np - t0 ? t : 0)) * act_row_bytes;
        __m128 s = _mm_loadu_ps(acc + t0);
        switch (np - t0) {
          case 1:
            s = Dot<kQ6, 1>(dec, a, s);
            break;
          case 2:
            s = Dot<kQ6, 2>(dec, a, s);
            break;
          case 3:
            s = Dot<kQ6, 3>(dec, a, s);
            break;
          default:
            s = Dot<kQ6, 4>(dec, a, s);
            break;
        }
        _mm_storeu_ps(acc + t0, s);
      }
    }
    for (int t = 0; t < np; ++t) y[(p0 + t) * y_stride] = acc[t];
  }
}

// One 32-value group of a Q8_K block: codes min(127, round(iscale * x)) as int32.
inline void QuantizeGroup(const float* x, __m256 iscale, __m256i (&v)[4]) {
  const __m256i top = _mm256_set1_epi32(127);
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), iscale)),
                            top);
  }
}

void QuantizeQ8K(const float* x, void* out, int64_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K, o += kActBlock) {
    __m256 vmax = _mm256_setzero_ps();
    for (int j = 0; j < kQK_K; j += 8) {
      vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    BlockQ8_K b;
    if (amax == 0.0f) {
      std::memset(&b, 0, sizeof(b));
      std::memcpy(o, &b, sizeof(b));
      continue;
    }
    // The reference keeps the first value of largest magnitude (its sign sets iscale's).
    const __m256 target = _mm256_set1_ps(amax);
    float max = 0.0f;
    for (int j = 0; j < kQK_K; j += 8) {
      const __m256 eq =
          _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask), target, _CMP_EQ_OQ);
      const int mask = _mm256_movemask_ps(eq);
      if (mask != 0) {
        max = x[j + __builtin_ctz(static_cast<unsigned>(mask))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    if (std::isinf(iscale)) {  // too small for a finite 127 / max: as a zero block
      std::memset(&b, 0, sizeof(b));
      std::memcpy(o, &b, sizeof(b));
      continue;
    }
    const __m256 vscale = _mm256_set1_ps(iscale);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256i sums[8];  // group g: lane pairs of its two 16-value sums (see below)
    for (int g = 0; g < 8; ++g) {
      __m256i v[4];
      QuantizeGroup(x + 32 * g, vscale, v);
      const __m256i packed =
          _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.qs + 32 * g),
                          _mm256_permutevar8x32_epi32(packed, order));
      // Lane-wise sums of values 0..15 and 16..31, pairwise added: the low half holds
      // partial sums of lanes 0..3 of each, the high half of lanes 4..7.
      sums[g] = _mm256_hadd_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3]));
    }
    __m128i bsums32[4];  // bsums[4q..4q+3] from groups 2q and 2q+1
    for (int q = 0; q < 4; ++q) {
      const __m256i s = _mm256_hadd_epi32(sums[2 * q], sums[2 * q + 1]);
      bsums32[q] = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b.bsums), _mm_packs_epi32(bsums32[0], bsums32[1]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b.bsums + 8),
                     _mm_packs_epi32(bsums32[2], bsums32[3]));
    b.d = 1.0f / iscale;
    std::memcpy(o, &b, sizeof(b));
  }
}

constexpr KQuantKernels kAvx2Set{"avx2", QuantizeQ8K, RowDot<BlockQ4_K>, RowDot<BlockQ5_K>,
                                 RowDot<BlockQ6_K>};

}  // namespace
}  // namespace pinfer::quants

#include "loaders/x86_target_pop.h"

namespace pinfer::quants {
const KQuantKernels* Avx2KQuantKernels() { return &kAvx2Set; }
}  // namespace pinfer::quants

#else  // not x86-64

#include "loaders/quants_q8k.h"

namespace pinfer::quants {
const KQuantKernels* Avx2KQuantKernels() { return nullptr; }
}  // namespace pinfer::quants

#endif
