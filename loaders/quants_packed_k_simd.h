// The vector kernels of quants_packed_k.h, written once over an instruction-set policy V and
// instantiated by quants_packed_k_{avx2,avxvnni,avx512vnni}.cc. Include it only below that
// file's `#pragma GCC target` (or clang's attribute push), after <immintrin.h> and the policy:
// every function here is vector code for that file's target, in an anonymous namespace so no
// copy is shared between files compiled for different targets. Internal to those files.
//
// A policy V has one lane of 32 bits per weight row (8 rows: one group; 16 rows: two groups,
// group g in lanes 0..7 and group g + 1 in lanes 8..15) and provides:
//   types I (int32 lanes), F (float lanes); kRows (8 or 16); kTok, kTok6: tokens per register
//     block for Q4_K / Q5_K and for Q6_K; kQuadTok6: up to this many tokens Q6_K runs the four
//     quarters' sub-block chains at once (decode: more in flight, each code vector loaded once);
//     kSplitTok: up to this many tokens, Q4_K / Q5_K run the
//     two sub-blocks of a 32-byte chunk of codes as two chains at once (3 int32 vectors per
//     token), above it one after the other (2 per token, each chunk loaded twice);
//   Load(p, gs): the 32 bytes at p (rows 0..7), with 16 rows also the 32 at p + gs (the same
//     field of the next group); Half(p, gs): 8 (16) fp16 as floats;
//   Dot4(acc, w, a): acc + per lane sum_i w.u8[i] * a.s8[i] over the lane's 4 bytes, a's 4 bytes
//     broadcast; Dot2(acc, w, b): acc + per lane w.s16[0] * b[0] + w.s16[1] * b[1], b's two int16
//     broadcast; Q6Pairs(p, gs): int16 pairs (p[r], p[8 + r]) of two 8-byte int8 rows per lane;
//   Shuffle (vpshufb within 128-bit lanes by a 32-byte pattern), the usual integer and float
//   operations, Store (lanes to floats);
//   optionally kDecodeOnce[3] (8-row policies with StoreI): per format (kQ4, kQ5, kQ6), whether
//   prefill (more than kTok tokens) runs GroupChunk (each super-block decoded once per chunk).
// Every integer sum is exact (int32, no saturation: vpmaddubsw's pair of 6-bit codes times
// |a| <= 127 stays below 2^15), so the order of integer additions is free; the float steps are
// quants_q8k.h's, lane by lane.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "loaders/quants_packed_k.h"
#include "loaders/quants_q8k.h"
#include "loaders/x86_pin.h"

namespace pinfer::quants {
namespace {

constexpr int64_t kActBlock = sizeof(BlockQ8_K);
constexpr int kQsOff = offsetof(BlockQ8_K, qs), kBsumsOff = offsetof(BlockQ8_K, bsums);
// Tokens per chunk: their activation rows stay in L2 while the row groups go by.
constexpr int64_t kChunkBytes = 384 << 10;

enum Fmt { kQ4, kQ5, kQ6 };
template <Fmt F>
struct PackedOf;
template <>
struct PackedOf<kQ4> {
  using Type = PackedQ4_K;
};
template <>
struct PackedOf<kQ5> {
  using Type = PackedQ5_K;
};
template <>
struct PackedOf<kQ6> {
  using Type = PackedQ6_K;
};

// vpshufb patterns (per 128 bits, repeated): byte j of each dword as an int32 (kScSel[j]), or
// as both int16 halves of the dword (kMinSel[j]).
struct Pattern {
  alignas(32) uint8_t b[32];
};
constexpr Pattern MakeSel(int j, bool pair) {
  Pattern p{};
  for (int i = 0; i < 32; ++i) {
    const int dword = (i % 16) / 4, byte = i % 4;
    const bool take = pair ? (byte % 2 == 0) : (byte == 0);
    p.b[i] = take ? static_cast<uint8_t>(4 * dword + j) : 0x80;
  }
  return p;
}
constexpr Pattern kScSel[4] = {MakeSel(0, false), MakeSel(1, false), MakeSel(2, false),
                               MakeSel(3, false)};
constexpr Pattern kMinSel[4] = {MakeSel(0, true), MakeSel(1, true), MakeSel(2, true),
                                MakeSel(3, true)};

inline float ActScale(const uint8_t* block) {
  float d;
  std::memcpy(&d, block, sizeof(d));
  return d;
}

// Bit s of every byte of v to bit 4 (16-bit shifts; what crosses from the other byte never
// lands on bit 4 or 5).
template <class V>
inline typename V::I BitsTo4(typename V::I v, int s) {
  switch (s) {
    case 0:
      return V::Slli16(v, 4);
    case 1:
      return V::Slli16(v, 3);
    case 2:
      return V::Slli16(v, 2);
    case 3:
      return V::Slli16(v, 1);
    case 4:
      return v;
    case 5:
      return V::Srli16(v, 1);
    case 6:
      return V::Srli16(v, 2);
    default:
      return V::Srli16(v, 3);
  }
}

// The 256-bit operations every policy of 8 rows shares (AVX2 code).
struct Ymm {
  using I = __m256i;
  using F = __m256;
  static constexpr int kRows = 8;
  static constexpr bool kI16 = false;
  static I Load(const void* p, int64_t) { return _mm256_loadu_si256(static_cast<const I*>(p)); }
  static void StoreI(void* p, I v) { _mm256_storeu_si256(static_cast<I*>(p), v); }
  static I Zero() { return _mm256_setzero_si256(); }
  static I Set1(int v) { return _mm256_set1_epi32(v); }
  static I And(I a, I b) { return _mm256_and_si256(a, b); }
  static I Or(I a, I b) { return _mm256_or_si256(a, b); }
  static I Add(I a, I b) { return _mm256_add_epi32(a, b); }
  static I Sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I MulLo(I a, I b) { return _mm256_mullo_epi32(a, b); }
  static I Srli16(I a, int n) { return _mm256_srli_epi16(a, n); }
  static I Slli16(I a, int n) { return _mm256_slli_epi16(a, n); }
  static I Srli32(I a, int n) { return _mm256_srli_epi32(a, n); }
  static I Slli32(I a, int n) { return _mm256_slli_epi32(a, n); }
  static I Shuffle(I a, const Pattern& p) {
    return _mm256_shuffle_epi8(a, _mm256_load_si256(reinterpret_cast<const I*>(p.b)));
  }
  static I ScI8(const int8_t* p, int64_t) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(Ptr(p))); }
  // Two 8-byte rows (p[0..7], p[8..15]) as int16 pairs (p[r], p[8 + r]) in lane r.
  static __m128i Pairs128(const int8_t* p) {
    const __m128i x = _mm_loadu_si128(Ptr(p));
    return _mm_unpacklo_epi8(x, _mm_srli_si128(x, 8));
  }
  static I Q6Pairs(const int8_t* p, int64_t) { return _mm256_cvtepi8_epi16(Pairs128(p)); }
  // The 4 bytes at a in every 32-bit lane (a vpbroadcastd from memory, not through a GPR).
  static I Bcast(const uint8_t* a) { return _mm256_broadcastd_epi32(_mm_loadu_si32(a)); }
  static F Half(const uint16_t* p, int64_t) { return _mm256_cvtph_ps(_mm_loadu_si128(Ptr(p))); }
  static F Set1F(float v) { return _mm256_set1_ps(v); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F Fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static F ToF(I a) { return _mm256_cvtepi32_ps(a); }
  static F LoadF(const float* p) { return _mm256_loadu_ps(p); }
  static void StoreF(float* p, F v) { _mm256_storeu_ps(p, v); }
  static const __m128i* Ptr(const void* p) { return static_cast<const __m128i*>(p); }
};

// Q4_K / Q5_K: the scales and mins of the 8 (16) rows, bytes j = 0..3 of each lane (quants_
// internal.h's UnpackKScaleMin on the row's 12 bytes, as 32-bit words).
template <class V, typename Packed>
struct KScalesV {
  typename V::I sc_lo, sc_hi, m_lo, m_hi;
  KScalesV(const Packed& p, int64_t gs) {
    using I = typename V::I;
    const I a = V::Load(p.scales[0], gs), b = V::Load(p.scales[1], gs),
            c = V::Load(p.scales[2], gs);
    const I m3f = V::Set1(0x3f3f3f3f), m0f = V::Set1(0x0f0f0f0f), m30 = V::Set1(0x30303030);
    sc_lo = V::And(a, m3f);
    m_lo = V::And(b, m3f);
    sc_hi = V::Or(V::And(c, m0f), V::And(V::Srli32(a, 2), m30));
    m_hi = V::Or(V::And(V::Srli32(c, 4), m0f), V::And(V::Srli32(b, 2), m30));
  }
  // Sub-block j's scales as PFlush takes them: int32 lanes, or (kI16) int16 pairs (sc, sc).
  typename V::I Sc(int j) const {
    return V::Shuffle(j < 4 ? sc_lo : sc_hi, V::kI16 ? kMinSel[j & 3] : kScSel[j & 3]);
  }
  typename V::I MinPair(int j) const { return V::Shuffle(j < 4 ? m_lo : m_hi, kMinSel[j & 3]); }
};

// Q4_K / Q5_K: the codes of sub-block j at position k from the nibbles in the low 4 bits of
// each byte of raw (Q5_K: with bit j of the packed qh as the fifth bit).
template <class V, Fmt kF, typename Packed>
inline typename V::I Codes45(const Packed& p, typename V::I raw, int k, int j, int64_t gs) {
  typename V::I w = V::And(raw, V::Set1(0x0f0f0f0f));
  if constexpr (kF == kQ5) {
    const typename V::I qh = V::Load(p.qh[k], gs);
    w = V::Or(w, V::And(BitsTo4<V>(qh, j), V::Set1(0x10101010)));
  } else {
    (void)p, (void)k, (void)j, (void)gs;
  }
  return w;
}

// The partial sums of one sub-block (a chain of up to kRun 4-value positions), then folded into
// the block's int32 sums times the sub-block's scale. VNNI policies: int32 lanes (vpdpbusd),
// folded by vpmulld. kI16 policies (AVX2): vpmaddubsw's int16 pairs added as int16, exact while
// the chain is short enough (kRun positions of at most 2 * max_q * 127 each stay below 2^15:
// Q4_K 8 x 3810, Q5_K 4 x 7874, Q6_K 2 x 16002), folded by vpmaddwd against (sc, sc) pairs: no
// vpmulld, and no vpmaddwd per position.
template <class V, Fmt kF>
constexpr int kRun = V::kI16 ? (kF == kQ4   ? 8
                                : kF == kQ5 ? 4
                                            : 2)
                             : 8;
// Policies with kPin (AVX2) keep the NT partial sums of a chain in registers step by step:
// unpinned, GCC 12 computes many products ahead of their adds and spills them to the stack.
template <class V, int NT>
inline void Pin(typename V::I (&v)[NT]) {
  if constexpr (requires { V::kPin; }) PinRegs(v);
}
// The pointer p, as far as the compiler knows unrelated to any before (kPin policies; as is
// for the others). GCC 12 otherwise keeps what it loaded through an earlier pointer in stack
// slots instead of loading it again from L1: the prefill paths take the block again per
// sub-block chain (else the code vectors of the chain before stay in stack slots), and the
// Q6_K decode loop each activation position (else predictive commoning loads the next (h, s)
// step's activation words early into general registers, rotates them through stack slots and
// broadcasts them from there, vmovd + vpbroadcastd, instead of one vpbroadcastd from memory).
template <class V, typename T>
inline T* Launder(T* p) {
  if constexpr (requires { V::kPin; }) asm("" : "+r"(p));
  return p;
}
template <class V>
inline typename V::I PDot(typename V::I acc, typename V::I w, const uint8_t* a) {
  if constexpr (V::kI16) {
    return V::Mad16(acc, w, a);
  } else {
    return V::Dot4(acc, w, a);
  }
}
template <class V>
inline typename V::I PFlush(typename V::I sumi, typename V::I part, typename V::I scale) {
  if constexpr (V::kI16) {
    return V::Add(sumi, V::Madd16(part, scale));
  } else {
    return V::Add(sumi, V::MulLo(part, scale));
  }
}
// Q6_K sub-block j's signed scales as PFlush takes them.
template <class V>
inline typename V::I ScaleQ6(const int8_t* p, int64_t gs) {
  const typename V::I x = V::ScI8(p, gs);
  if constexpr (V::kI16) {
    return V::Or(V::And(x, V::Set1(0xffff)), V::Slli32(x, 16));
  } else {
    return x;
  }
}

// The float step of one super-block for one token (quants_q8k.h's order, lane by lane): acc +=
// dw * da * sumi, then Q4_K / Q5_K acc -= dm * da * side (the mins against the block sums),
// Q6_K acc += dw * da * (sumi - 32 * side) in one step instead (side: the offset's sums; dm
// unused).
template <class V, Fmt kF>
inline void FinishBlock(float* acc, typename V::F dw, typename V::F dm, const uint8_t* a,
                        typename V::I sumi, typename V::I side) {
  const typename V::F da = V::Set1F(ActScale(a));
  if constexpr (kF == kQ6) {
    (void)dm;
    const typename V::I total = V::Sub(sumi, V::Slli32(side, 5));
    V::StoreF(acc, V::Fmadd(V::Mul(dw, da), V::ToF(total), V::LoadF(acc)));
  } else {
    const typename V::F s = V::Fmadd(V::Mul(dw, da), V::ToF(sumi), V::LoadF(acc));
    V::StoreF(acc, V::Fnmadd(V::Mul(dm, da), V::ToF(side), s));
  }
}

// One super-block of the register block's rows against NT tokens: a[t] is token t's activation
// block, acc[t] its float accumulators (V::kRows floats, in memory).
template <class V, Fmt kF, int NT>
inline void BlockStep(const uint8_t* blk, int64_t gs, const uint8_t* const (&a)[NT],
                      float (*acc)[V::kRows]) {
  using I = typename V::I;
  using F = typename V::F;
  using Packed = typename PackedOf<kF>::Type;
  const Packed& p = *reinterpret_cast<const Packed*>(blk);
  const Packed& p0 = p;  // the prefill loops below take p again from Launder<V>(&p0)
  I sumi[NT];
  for (int t = 0; t < NT; ++t) sumi[t] = V::Zero();
  if constexpr (kF == kQ6) {
    const I low4 = V::Set1(0x0f0f0f0f), top2 = V::Set1(0x30303030);
    if constexpr (NT <= V::kQuadTok6) {  // decode: the 4 quarters' chains at once
      for (int h = 0; h < 2; ++h) {
        for (int s = 0; s < 2; ++s) {  // sub-blocks 8h + 2q + s, q = 0..3: positions 4s..4s+3
          const uint8_t* as[NT];
          for (int t = 0; t < NT; ++t) as[t] = Launder<V>(a[t] + kQsOff + 128 * h + 16 * s);
          I sc[4], tq[4][NT];
          for (int q = 0; q < 4; ++q) {
            sc[q] = ScaleQ6<V>(p.scales[8 * h + 2 * q + s], gs);
            for (int t = 0; t < NT; ++t) tq[q][t] = V::Zero();
          }
#pragma GCC unroll 4
          for (int kk = 0; kk < 4; ++kk) {
            const int k = 4 * s + kk;
            const I ql0 = V::Load(p.ql[h][0][k], gs), ql1 = V::Load(p.ql[h][1][k], gs);
            const I qh = V::Load(p.qh[h][k], gs);
            for (int q = 0; q < 4; ++q) {
              const I ql = (q & 1) ? ql1 : ql0;
              const I w = V::Or(V::And(q >= 2 ? V::Srli16(ql, 4) : ql, low4),
                                V::And(BitsTo4<V>(qh, 2 * q), top2));
              for (int t = 0; t < NT; ++t) {
                tq[q][t] = PDot<V>(tq[q][t], w, as[t] + 32 * q + 4 * kk);
              }
            }
            if ((kk + 1) % kRun<V, kF> == 0 || kk == 3) {
              for (int q = 0; q < 4; ++q) {
                for (int t = 0; t < NT; ++t) {
                  sumi[t] = PFlush<V>(sumi[t], tq[q][t], sc[q]);
                  tq[q][t] = V::Zero();
                }
              }
            }
          }
        }
      }
    } else {  // prefill: one sub-block's chains at a time (2 vectors per token: more tokens)
      for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {  // quarter q: ql half c = q % 2, nibble q / 2
#pragma GCC unroll 2
          for (int s = 0; s < 2; ++s) {  // sub-block 8h + 2q + s: positions 4s..4s+3
            const Packed& p = *Launder<V>(&p0);
            const I sc = ScaleQ6<V>(p.scales[8 * h + 2 * q + s], gs);
            I tmp[NT];
            for (int t = 0; t < NT; ++t) tmp[t] = V::Zero();
#pragma GCC unroll 4
            for (int kk = 0; kk < 4; ++kk) {
              const int k = 4 * s + kk;
              I ql = V::Load(p.ql[h][q & 1][k], gs);
              if (q >= 2) ql = V::Srli16(ql, 4);
              const I qh = V::Load(p.qh[h][k], gs);
              const I w = V::Or(V::And(ql, low4), V::And(BitsTo4<V>(qh, 2 * q), top2));
              for (int t = 0; t < NT; ++t) {
                tmp[t] = PDot<V>(tmp[t], w, a[t] + kQsOff + 128 * h + 32 * q + 4 * k);
              }
              Pin<V>(tmp);
              if ((kk + 1) % kRun<V, kF> == 0 || kk == 3) {
                for (int t = 0; t < NT; ++t) {
                  sumi[t] = PFlush<V>(sumi[t], tmp[t], sc);
                  tmp[t] = V::Zero();
                }
                Pin<V>(sumi);
              }
            }
          }
        }
      }
    }
    I side[NT];
    for (int t = 0; t < NT; ++t) side[t] = V::Zero();
    for (int kp = 0; kp < 8; ++kp) {
      const I pairs = V::Q6Pairs(p.scales[2 * kp], gs);
      for (int t = 0; t < NT; ++t) {
        side[t] = V::Dot2(side[t], pairs, a[t] + kBsumsOff + 4 * kp);
      }
    }
    const F dw = V::Half(p.d, gs);
    for (int t = 0; t < NT; ++t) FinishBlock<V, kF>(acc[t], dw, dw, a[t], sumi[t], side[t]);
  } else {
    const KScalesV<V, Packed> sc(p, gs);
    for (int c = 0; c < 4; ++c) {
      const I s0 = sc.Sc(2 * c), s1 = sc.Sc(2 * c + 1);
      if constexpr (NT <= V::kSplitTok) {  // both sub-blocks' chains at once (more in flight)
        I lo[NT], hi[NT];
        for (int t = 0; t < NT; ++t) lo[t] = hi[t] = V::Zero();
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const I raw = V::Load(p.qs[c][k], gs);
          const I wl = Codes45<V, kF>(p, raw, k, 2 * c, gs);
          const I wh = Codes45<V, kF>(p, V::Srli16(raw, 4), k, 2 * c + 1, gs);
          for (int t = 0; t < NT; ++t) {
            lo[t] = PDot<V>(lo[t], wl, a[t] + kQsOff + 64 * c + 4 * k);
            hi[t] = PDot<V>(hi[t], wh, a[t] + kQsOff + 64 * c + 32 + 4 * k);
          }
          if ((k + 1) % kRun<V, kF> == 0) {
            for (int t = 0; t < NT; ++t) {
              sumi[t] = PFlush<V>(PFlush<V>(sumi[t], lo[t], s0), hi[t], s1);
              lo[t] = hi[t] = V::Zero();
            }
          }
        }
      } else {  // one sub-block at a time (fewer registers: more tokens)
#pragma GCC unroll 2
        for (int half = 0; half < 2; ++half) {
          const Packed& p = *Launder<V>(&p0);
          const I s = half ? s1 : s0;
          I tmp[NT];
          for (int t = 0; t < NT; ++t) tmp[t] = V::Zero();
#pragma GCC unroll 8
          for (int k = 0; k < 8; ++k) {
            I raw = V::Load(p.qs[c][k], gs);
            if (half) raw = V::Srli16(raw, 4);
            const I wq = Codes45<V, kF>(p, raw, k, 2 * c + half, gs);
            for (int t = 0; t < NT; ++t) {
              tmp[t] = PDot<V>(tmp[t], wq, a[t] + kQsOff + 64 * c + 32 * half + 4 * k);
            }
            Pin<V>(tmp);
            if ((k + 1) % kRun<V, kF> == 0) {
              for (int t = 0; t < NT; ++t) {
                sumi[t] = PFlush<V>(sumi[t], tmp[t], s);
                tmp[t] = V::Zero();
              }
              Pin<V>(sumi);
            }
          }
        }
      }
    }
    I summ[NT];
    for (int t = 0; t < NT; ++t) summ[t] = V::Zero();
    for (int j = 0; j < 8; ++j) {
      const I mp = sc.MinPair(j);
      for (int t = 0; t < NT; ++t) summ[t] = V::Dot2(summ[t], mp, a[t] + kBsumsOff + 4 * j);
    }
    const F dw = V::Half(p.d, gs), dm = V::Half(p.dmin, gs);
    for (int t = 0; t < NT; ++t) FinishBlock<V, kF>(acc[t], dw, dm, a[t], sumi[t], summ[t]);
  }
}

// Software prefetch kAhead super-blocks ahead in the first token tile of each row group (the one
// that reads the weights from DRAM; the chunk's other tiles find them in L2). Measured on
// packed_kquant_bench's BM_PackedDram (8 copies of a 4096 x 4096 matrix, past L3), 1 token, one
// core, load about 4.5: avx512vnni Q4_K 24.8 -> 38 GB/s, Q6_K 15.0 -> 34 GB/s; avx2 and avxvnni
// ~10-20%; 1 block ahead or 3 about as good, 4 and 8 worse.
constexpr int kAhead = 2;

// V::kRows rows (rows_valid of them stored) starting at the group at w, x NT tokens; prefetch:
// whether to prefetch the rows' later blocks (see kAhead).
template <class V, Fmt kF, int NT>
void Tile(const uint8_t* w, int64_t gs, int rows_valid, const uint8_t* act, int64_t act_row_bytes,
          int64_t nb, float* y, int64_t y_row_stride, bool prefetch) {
  using Packed = typename PackedOf<kF>::Type;
  alignas(64) float acc[NT][V::kRows] = {};
  for (int64_t i = 0; i < nb; ++i) {
    if (prefetch && i + kAhead < nb) {  // block i + kAhead of each of the register block's groups
      const uint8_t* next = w + (i + kAhead) * static_cast<int64_t>(sizeof(Packed));
      for (int g = 0; g < V::kRows / kPackKRows; ++g) {
        for (size_t l = 0; l < sizeof(Packed); l += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(next + g * gs + l), _MM_HINT_T0);
        }
      }
    }
    const uint8_t* a[NT];
    for (int t = 0; t < NT; ++t) a[t] = act + t * act_row_bytes + i * kActBlock;
    BlockStep<V, kF, NT>(w + i * static_cast<int64_t>(sizeof(Packed)), gs, a, acc);
  }
  for (int t = 0; t < NT; ++t) {
    for (int r = 0; r < rows_valid; ++r) y[t * y_row_stride + r] = acc[t][r];
  }
}

// Prefill by super-block (policies with kDecodeOnce: 8 rows, one group per register block). A
// group's super-block is decoded once per token chunk into DecodedBlock (codes, sub-block scales
// and side factors as the vectors BlockStep builds), then every register block of the chunk's
// tokens runs over it: the unpacking (nibbles, Q6_K's top two bits, 6-bit scales and mins) is
// paid once per chunk instead of once per kTok tokens. Same integer sums and float steps as
// BlockStep, in the same order per super-block (bit for bit).
template <class V, Fmt kF>
struct DecodedBlock {
  static constexpr int kSub = kF == kQ6 ? 16 : 8;  // sub-blocks (16 / 32 values)
  static constexpr int kPos = kF == kQ6 ? 4 : 8;   // 4-value positions per sub-block
  alignas(32) uint8_t codes[kSub][kPos][32];       // unsigned codes, row r in lane r
  alignas(32) uint8_t sc[kSub][32];                // sub-block j's scale as PFlush takes it
  // Against the activation block sums (V::Dot2 with bsums + 4j): Q4_K / Q5_K (m_j, m_j),
  // Q6_K (sc[2j], sc[2j + 1]).
  alignas(32) uint8_t side[8][32];
  alignas(32) float dw[kPackKRows], dm[kPackKRows];
};

template <class V, Fmt kF>
inline void DecodeBlock(const uint8_t* blk, DecodedBlock<V, kF>& d) {
  static_assert(V::kRows == kPackKRows, "DecodedBlock holds one group");
  using I = typename V::I;
  using Packed = typename PackedOf<kF>::Type;
  const Packed& p = *reinterpret_cast<const Packed*>(blk);
  constexpr int64_t gs = 0;  // one group: no second group's field
  if constexpr (kF == kQ6) {
    const I low4 = V::Set1(0x0f0f0f0f), top2 = V::Set1(0x30303030);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const I ql0 = V::Load(p.ql[h][0][k], gs), ql1 = V::Load(p.ql[h][1][k], gs);
        const I qh = V::Load(p.qh[h][k], gs);
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {  // sub-block 8h + 2q + k / 4, position k % 4
          const I ql = (q & 1) ? ql1 : ql0;
          const I w = V::Or(V::And(q >= 2 ? V::Srli16(ql, 4) : ql, low4),
                            V::And(BitsTo4<V>(qh, 2 * q), top2));
          V::StoreI(d.codes[8 * h + 2 * q + k / 4][k % 4], w);
        }
      }
    }
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) V::StoreI(d.sc[j], ScaleQ6<V>(p.scales[j], gs));
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) V::StoreI(d.side[j], V::Q6Pairs(p.scales[2 * j], gs));
  } else {
    const KScalesV<V, Packed> sc(p, gs);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const I raw = V::Load(p.qs[c][k], gs);
        V::StoreI(d.codes[2 * c][k], Codes45<V, kF>(p, raw, k, 2 * c, gs));
        V::StoreI(d.codes[2 * c + 1][k], Codes45<V, kF>(p, V::Srli16(raw, 4), k, 2 * c + 1, gs));
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      V::StoreI(d.sc[j], sc.Sc(j));
      V::StoreI(d.side[j], sc.MinPair(j));
    }
    V::StoreF(d.dm, V::Half(p.dmin, gs));
  }
  V::StoreF(d.dw, V::Half(p.d, gs));
}

// BlockStep over a decoded super-block: NT tokens (activation block of token t at act + t *
// act_row_bytes), their float accumulators acc[t].
template <class V, Fmt kF, int NT>
void DecodedTile(const DecodedBlock<V, kF>& d, const uint8_t* act, int64_t act_row_bytes,
                 float (*acc)[V::kRows]) {
  using I = typename V::I;
  using F = typename V::F;
  using D = DecodedBlock<V, kF>;
  const uint8_t* a[NT];
  for (int t = 0; t < NT; ++t) a[t] = act + t * act_row_bytes;
  I sumi[NT];
  for (int t = 0; t < NT; ++t) sumi[t] = V::Zero();
#pragma GCC unroll 16
  for (int j = 0; j < D::kSub; ++j) {
    I tmp[NT];
    for (int t = 0; t < NT; ++t) tmp[t] = V::Zero();
#pragma GCC unroll 8
    for (int k = 0; k < D::kPos; ++k) {
      const I w = V::Load(d.codes[j][k], 0);
      for (int t = 0; t < NT; ++t) {
        tmp[t] = PDot<V>(tmp[t], w, a[t] + kQsOff + 4 * D::kPos * j + 4 * k);
      }
      Pin<V>(tmp);
      if ((k + 1) % kRun<V, kF> == 0 || k == D::kPos - 1) {
        const I s = V::Load(d.sc[j], 0);
        for (int t = 0; t < NT; ++t) {
          sumi[t] = PFlush<V>(sumi[t], tmp[t], s);
          tmp[t] = V::Zero();
        }
        Pin<V>(sumi);
      }
    }
  }
  I side[NT];
  for (int t = 0; t < NT; ++t) side[t] = V::Zero();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const I m = V::Load(d.side[j], 0);
    for (int t = 0; t < NT; ++t) side[t] = V::Dot2(side[t], m, a[t] + kBsumsOff + 4 * j);
  }
  const F dw = V::LoadF(d.dw);
  for (int t = 0; t < NT; ++t) {
    FinishBlock<V, kF>(acc[t], dw, kF == kQ6 ? dw : V::LoadF(d.dm), a[t], sumi[t], side[t]);
  }
}

// Tokens of one chunk in the decode-once path (their float accumulators on the stack): per
// super-block their activation blocks (30 x 292 bytes) stay in L1 beside the decoded block.
// packed_kquant_bench 4096 x 4096 x 512 tokens, avx2, one core at load ~7, best of 4 (CPU ms per
// pass): Q5_K 30 / 48 / 96 tokens 103 / 108 / 115, Q6_K 120 / 123 / 129.
constexpr int kMaxChunkTok = 30;

// One row group (rows_valid rows stored) x nt <= kMaxChunkTok tokens: each super-block decoded
// once, then the tokens in register blocks of kTokOf<V, kF> (the last one narrower).
template <class V, Fmt kF>
void GroupChunk(const uint8_t* w, int rows_valid, const uint8_t* act, int64_t act_row_bytes, int nt,
                int64_t nb, float* y, int64_t y_row_stride) {
  using Packed = typename PackedOf<kF>::Type;
  using Fn = void (*)(const DecodedBlock<V, kF>&, const uint8_t*, int64_t, float(*)[V::kRows]);
  constexpr int kT = kF == kQ6 ? V::kTok6 : V::kTok;
  static constexpr Fn kFns[] = {DecodedTile<V, kF, 1>, DecodedTile<V, kF, 2>,
                                DecodedTile<V, kF, 3>, DecodedTile<V, kF, 4>,
                                DecodedTile<V, kF, 5>, DecodedTile<V, kF, 6>};
  static_assert(kT <= 6, "kFns has register blocks of up to 6 tokens");
  alignas(64) float acc[kMaxChunkTok][V::kRows];
  for (int t = 0; t < nt; ++t) {
    for (int r = 0; r < V::kRows; ++r) acc[t][r] = 0.0f;
  }
  DecodedBlock<V, kF> d;
  for (int64_t i = 0; i < nb; ++i) {
    if (i + kAhead < nb) {
      const uint8_t* next = w + (i + kAhead) * static_cast<int64_t>(sizeof(Packed));
      for (size_t l = 0; l < sizeof(Packed); l += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next + l), _MM_HINT_T0);
      }
    }
    DecodeBlock<V, kF>(w + i * static_cast<int64_t>(sizeof(Packed)), d);
    const uint8_t* ai = act + i * kActBlock;
    for (int t0 = 0; t0 < nt; t0 += kT) {
      const int n = nt - t0 < kT ? nt - t0 : kT;
      for (int t = t0 + kT; t < t0 + 2 * kT && t < nt; ++t) {  // the next register block's
        const char* an = reinterpret_cast<const char*>(ai + t * act_row_bytes);
        for (int64_t l = 0; l < kActBlock + 63; l += 64) {
          _mm_prefetch(an + (l < kActBlock ? l : kActBlock - 1), _MM_HINT_T0);
        }
      }
      kFns[n - 1](d, ai + t0 * act_row_bytes, act_row_bytes, acc + t0);
    }
  }
  for (int t = 0; t < nt; ++t) {
    for (int r = 0; r < rows_valid; ++r) y[t * y_row_stride + r] = acc[t][r];
  }
}

template <class V, Fmt kF, int... T>
inline void TileN(int nt, const uint8_t* w, int64_t gs, int rows_valid, const uint8_t* act,
                  int64_t act_row_bytes, int64_t nb, float* y, int64_t y_row_stride, bool prefetch,
                  std::integer_sequence<int, T...>) {
  using Fn = void (*)(const uint8_t*, int64_t, int, const uint8_t*, int64_t, int64_t, float*,
                      int64_t, bool);
  static constexpr Fn kFns[] = {Tile<V, kF, T + 1>...};
  kFns[nt - 1](w, gs, rows_valid, act, act_row_bytes, nb, y, y_row_stride, prefetch);
}

// Tokens per register block of policy V for format kF (Q6_K keeps fewer registers per token).
template <class V, Fmt kF>
constexpr int kTokOf = kF == kQ6 ? V::kTok6 : V::kTok;

// The PackedDotFn: Wide's register blocks (one or two groups), Narrow's (one group) for a last
// odd group where Wide takes two.
template <class Wide, class Narrow, Fmt kF>
void PackedDot(const void* w, int64_t n_rows, const void* acts, int64_t act_row_bytes, int n_tok,
               int64_t n, float* y, int64_t y_row_stride) {
  using Packed = typename PackedOf<kF>::Type;
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(acts);
  const int64_t nb = n / kQK_K;
  const int64_t gs = nb * static_cast<int64_t>(sizeof(Packed));
  const int64_t n_groups = (n_rows + kPackKRows - 1) / kPackKRows;
  constexpr int kWideGroups = Wide::kRows / kPackKRows;
  constexpr int kWideTok = kTokOf<Wide, kF>, kNarrowTok = kTokOf<Narrow, kF>;
  int64_t chunk = kChunkBytes / (act_row_bytes > 0 ? act_row_bytes : 1) / kWideTok * kWideTok;
  if (chunk < kWideTok) chunk = kWideTok;
  if constexpr (requires { Wide::kDecodeOnce[kF]; }) {
    static_assert(std::is_same_v<Wide, Narrow> && Wide::kRows == kPackKRows);
    // Prefill: each group's super-blocks decoded once per chunk.
    if (Wide::kDecodeOnce[kF] && n_tok > kWideTok) {
      if (chunk > kMaxChunkTok) chunk = kMaxChunkTok / kWideTok * kWideTok;
      for (int64_t c0 = 0; c0 < n_tok; c0 += chunk) {
        const int nt = static_cast<int>(c0 + chunk < n_tok ? chunk : n_tok - c0);
        for (int64_t g = 0; g < n_groups; ++g) {
          const int64_t r0 = g * kPackKRows;
          const int rows_valid =
              static_cast<int>(n_rows - r0 < kPackKRows ? n_rows - r0 : kPackKRows);
          GroupChunk<Wide, kF>(wb + g * gs, rows_valid, ab + c0 * act_row_bytes, act_row_bytes, nt,
                               nb, y + c0 * y_row_stride + r0, y_row_stride);
        }
      }
      return;
    }
  }
  for (int64_t c0 = 0; c0 < n_tok; c0 += chunk) {
    const int64_t c1 = c0 + chunk < n_tok ? c0 + chunk : n_tok;
    for (int64_t g = 0; g < n_groups;) {
      const bool wide = g + kWideGroups <= n_groups;
      const int groups = wide ? kWideGroups : 1;
      const int64_t r0 = g * kPackKRows;
      const int rows_valid =
          static_cast<int>(n_rows - r0 < groups * kPackKRows ? n_rows - r0 : groups * kPackKRows);
      const uint8_t* wg = wb + g * gs;
      for (int64_t t0 = c0; t0 < c1;) {
        const uint8_t* at = ab + t0 * act_row_bytes;
        float* yt = y + t0 * y_row_stride + r0;
        if (wide) {
          const int nt = static_cast<int>(c1 - t0 < kWideTok ? c1 - t0 : kWideTok);
          TileN<Wide, kF>(nt, wg, gs, rows_valid, at, act_row_bytes, nb, yt, y_row_stride, t0 == c0,
                          std::make_integer_sequence<int, kWideTok>());
          t0 += nt;
        } else {
          const int nt = static_cast<int>(c1 - t0 < kNarrowTok ? c1 - t0 : kNarrowTok);
          TileN<Narrow, kF>(nt, wg, gs, rows_valid, at, act_row_bytes, nb, yt, y_row_stride,
                            t0 == c0, std::make_integer_sequence<int, kNarrowTok>());
          t0 += nt;
        }
      }
      g += groups;
    }
  }
}

}  // namespace
}  // namespace pinfer::quants
