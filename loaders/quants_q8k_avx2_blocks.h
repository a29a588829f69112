// The AVX2 decoders of the K-quant weight blocks (Q4_K, Q5_K, Q6_K) against Q8_K activations,
// shared by the row kernels (quants_q8k_avx2.cc) and the tiled ones (quants_tile_avx2.cc).
// Include it only below a `#pragma GCC target("avx2,fma,f16c")` (or clang's attribute push),
// after <immintrin.h>: everything here is AVX2 code and must never be compiled for, or inlined
// into, the build's baseline. Internal to those two files.
//
// Weight sources, one block each: Q(k) gives values 32k..32k+31 as unsigned codes, Scale(k) the
// int16 multipliers of vpmaddwd for them (one per pair of products), Side() the int16 vector
// that multiplies the activation block sums (Q4_K / Q5_K: m[j] in lanes 2j and 2j+1; Q6_K: the
// 16 sub-block scales), d and dmin the block's scales. The Reg* sources decode from the block
// as the dot asks (in registers); Decoded holds a block decoded once for a longer pass.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "loaders/quants_q8k.h"

namespace pinfer::quants::q8k_avx2 {

// An fp16 scale as float with F16C (exact, as fp16.h's portable Fp16ToFp32, which this code must
// not call: fp16.h is baseline code, and its conversion is a software loop).
inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

constexpr int64_t kActBlock = sizeof(BlockQ8_K);
constexpr int kQsOffset = offsetof(BlockQ8_K, qs), kBsumsOffset = offsetof(BlockQ8_K, bsums);

inline __m256i Load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m256i Splat8(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }

// A vpshufb control giving int16 lane i the int16 lane sel[i] of its own 128-bit half.
struct PairSelect {
  alignas(32) int8_t bytes[32];
};
constexpr PairSelect Pairs(const int8_t (&sel)[16]) {
  PairSelect p{};
  for (int i = 0; i < 16; ++i) {
    p.bytes[2 * i] = static_cast<int8_t>(2 * sel[i]);
    p.bytes[2 * i + 1] = static_cast<int8_t>(2 * sel[i] + 1);
  }
  return p;
}
constexpr PairSelect Uniform(int k) {
  int8_t sel[16] = {};
  for (int8_t& v : sel) v = static_cast<int8_t>(k);
  return Pairs(sel);
}
constexpr PairSelect Halves(int lo, int hi) {  // lanes 0..7 take lo, 8..15 take hi
  int8_t sel[16] = {};
  for (int i = 0; i < 16; ++i) sel[i] = static_cast<int8_t>(i < 8 ? lo : hi);
  return Pairs(sel);
}
constexpr PairSelect kUniform[8] = {Uniform(0), Uniform(1), Uniform(2), Uniform(3),
                                    Uniform(4), Uniform(5), Uniform(6), Uniform(7)};
constexpr PairSelect kHalves[4] = {Halves(0, 1), Halves(2, 3), Halves(4, 5), Halves(6, 7)};
// Lanes 2j and 2j+1 take lane j of the 8 (the low half j = 0..3, the high half 4..7).
constexpr int8_t kMinSel[16] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7};
constexpr PairSelect kMinPairs = Pairs(kMinSel);

inline __m256i PairShuffle(__m256i v, const PairSelect& sel) {
  return _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(sel.bytes)));
}

// Q4_K / Q5_K: the 6-bit scales and mins of the 12 packed bytes (quants_internal.h's
// UnpackKScaleMin, four bytes at a time): sc[0..7] as int16 in both 128-bit halves, and Side().
struct KScales {
  __m256i sc, side;
  explicit KScales(const uint8_t* packed) {
    uint32_t a, b, c;
    std::memcpy(&a, packed, 4);
    std::memcpy(&b, packed + 4, 4);
    std::memcpy(&c, packed + 8, 4);
    const uint32_t sc_lo = a & 0x3f3f3f3f, m_lo = b & 0x3f3f3f3f;
    const uint32_t sc_hi = (c & 0x0f0f0f0f) | ((a >> 2) & 0x30303030);
    const uint32_t m_hi = ((c >> 4) & 0x0f0f0f0f) | ((b >> 2) & 0x30303030);
    sc = _mm256_broadcastsi128_si256(
        _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(sc_hi), static_cast<int>(sc_lo))));
    const __m256i m = _mm256_broadcastsi128_si256(
        _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(m_hi), static_cast<int>(m_lo))));
    side = PairShuffle(m, kMinPairs);
  }
};

struct RegQ4K {
  const BlockQ4_K& b;
  KScales s;
  float d, dmin;
  explicit RegQ4K(const BlockQ4_K& blk)
      : b(blk), s(blk.scales), d(HalfToFloat(blk.d)), dmin(HalfToFloat(blk.dmin)) {}
  // Chunk k / 2 of qs: low nibbles are sub-block k for even k, high nibbles for odd k.
  __m256i Q(int k) const {
    __m256i raw = Load(b.qs + 32 * (k >> 1));
    if (k & 1) raw = _mm256_srli_epi16(raw, 4);
    return _mm256_and_si256(raw, Splat8(0x0f));
  }
  __m256i Scale(int k) const { return PairShuffle(s.sc, kUniform[k]); }
  __m256i Side() const { return s.side; }
};

struct RegQ5K {
  const BlockQ5_K& b;
  KScales s;
  __m256i h;  // bit k of byte l: the fifth bit of value l of sub-block k
  float d, dmin;
  explicit RegQ5K(const BlockQ5_K& blk)
      : b(blk), s(blk.scales), h(Load(blk.qh)), d(HalfToFloat(blk.d)), dmin(HalfToFloat(blk.dmin)) {}
  __m256i Q(int k) const {
    __m256i raw = Load(b.qs + 32 * (k >> 1));
    if (k & 1) raw = _mm256_srli_epi16(raw, 4);
    // Bit k to bit 4 (16-bit shifts: what crosses from the other byte lands outside bit 4).
    const __m256i high = k <= 4 ? _mm256_slli_epi16(h, 4 - k) : _mm256_srli_epi16(h, k - 4);
    return _mm256_or_si256(_mm256_and_si256(raw, Splat8(0x0f)),
                           _mm256_and_si256(high, Splat8(0x10)));
  }
  __m256i Scale(int k) const { return PairShuffle(s.sc, kUniform[k]); }
  __m256i Side() const { return s.side; }
};

struct RegQ6K {
  const BlockQ6_K& b;
  __m256i sc, lo, hi;  // the 16 signed scales as int16; sc[0..7] and sc[8..15] in both halves
  float d, dmin = 0.0f;
  explicit RegQ6K(const BlockQ6_K& blk)
      : b(blk),
        sc(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)))),
        lo(_mm256_permute2x128_si256(sc, sc, 0x00)),
        hi(_mm256_permute2x128_si256(sc, sc, 0x11)),
        d(HalfToFloat(blk.d)) {}
  // Half k / 4 (64 ql bytes, 32 qh bytes), quarter j = k % 4: low nibbles of ql bytes 0..31
  // (j = 0) or 32..63 (j = 1), high nibbles (j = 2, 3), with qh bits 2j and 2j+1 on top.
  __m256i Q(int k) const {
    const int half = k >> 2, j = k & 3;
    __m256i ql = Load(b.ql + 64 * half + 32 * (j & 1));
    if (j >= 2) ql = _mm256_srli_epi16(ql, 4);
    const __m256i qh = Load(b.qh + 32 * half);
    const __m256i high = j <= 2 ? _mm256_slli_epi16(qh, 4 - 2 * j) : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(_mm256_and_si256(ql, Splat8(0x0f)),
                           _mm256_and_si256(high, Splat8(0x30)));
  }
  // Q(k) spans sub-blocks 2k (low half) and 2k+1 (high half).
  __m256i Scale(int k) const { return PairShuffle(k < 4 ? lo : hi, kHalves[k & 3]); }
  __m256i Side() const { return sc; }
};

template <typename Block>
struct RegOf;
template <>
struct RegOf<BlockQ4_K> {
  using Type = RegQ4K;
};
template <>
struct RegOf<BlockQ5_K> {
  using Type = RegQ5K;
};
template <>
struct RegOf<BlockQ6_K> {
  using Type = RegQ6K;
};

struct Decoded {
  __m256i q[8], scale[8], side;
  float d, dmin;
  template <typename Reg>
  void From(const Reg& r) {
    for (int k = 0; k < 8; ++k) {
      q[k] = r.Q(k);
      scale[k] = r.Scale(k);
    }
    side = r.Side();
    d = r.d;
    dmin = r.dmin;
  }
  __m256i Q(int k) const { return q[k]; }
  __m256i Scale(int k) const { return scale[k]; }
  __m256i Side() const { return side; }
};

inline float ScaleOf(const uint8_t* act_block) {
  float d;
  std::memcpy(&d, act_block, sizeof(d));
  return d;
}

}  // namespace pinfer::quants::q8k_avx2
