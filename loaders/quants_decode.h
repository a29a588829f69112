// AVX2 decoders of the quantized block formats into floats, shared by the fast dequantizers,
// the fused dot products and the batched matmul's row decoding (internal to loaders/; include
// only as quants_simd.h says: in the avx2 set's files, after their target pragma; everything
// here is in an anonymous namespace, one copy per file).
//
// Each decoder walks a row of nb blocks and calls group(v0, v1, v2, v3) once per 32 consecutive
// values, in row order, where v_k holds values 8k..8k+7 of the group, each computed as
// d * q - o by one fused multiply-subtract (a multiply for the formats without an offset). A
// consumer that stores the groups dequantizes the row; one that multiplies them into x right
// away computes a dot product with exactly the same weights, without a round trip through
// memory. For every format d * q is exact in float (an fp16 scale, times at most an 8-bit
// integer sub-block scale, times a code of at most 6 bits, stays within 24 bits), so the only
// rounding is the subtraction of o, and the floats are those of the scalar kernels (a Q4_0 zero
// may differ in sign, see DecodeQ4_0).
#pragma once

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"
#include "loaders/quants_simd.h"

namespace pinfer::quants::simd {
namespace {

// The 32 signed byte codes q as four groups of 8 floats, d_lo * q - o for bytes 0..15 and
// d_hi * q - o for bytes 16..31.
template <typename Group>
inline void Group32(__m256i q, __m256 d_lo, __m256 d_hi, __m256 o, Group& group) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  group(_mm256_fmsub_ps(d_lo, I8Lo(lo), o), _mm256_fmsub_ps(d_lo, I8Hi(lo), o),
        _mm256_fmsub_ps(d_hi, I8Lo(hi), o), _mm256_fmsub_ps(d_hi, I8Hi(hi), o));
}

// As above without an offset: d * q is exact, so a multiply gives the same floats as the
// multiply-subtract of 0 (the sign of a zero included).
template <typename Group>
inline void Group32(__m256i q, __m256 d_lo, __m256 d_hi, Group& group) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  group(_mm256_mul_ps(d_lo, I8Lo(lo)), _mm256_mul_ps(d_lo, I8Hi(lo)), _mm256_mul_ps(d_hi, I8Lo(hi)),
        _mm256_mul_ps(d_hi, I8Hi(hi)));
}

// Four groups of 8 codes already widened to 32 bits, as d * q - o.
template <typename Group>
inline void Group32(const __m256i (&q)[4], __m256 d, __m256 o, Group& group) {
  group(_mm256_fmsub_ps(d, _mm256_cvtepi32_ps(q[0]), o),
        _mm256_fmsub_ps(d, _mm256_cvtepi32_ps(q[1]), o),
        _mm256_fmsub_ps(d, _mm256_cvtepi32_ps(q[2]), o),
        _mm256_fmsub_ps(d, _mm256_cvtepi32_ps(q[3]), o));
}

// The 32 nibbles of a Q4_0 / Q4_1 block widened to 32 bits: bytes 0..7 and 8..15 zero-extended
// straight from memory, low nibbles giving values 0..15 and high nibbles 16..31.
inline void Nibbles32(const uint8_t* qs, __m256i (&q)[4]) {
  const __m256i low4 = _mm256_set1_epi32(0x0f);
  const __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs)));
  const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8)));
  q[0] = _mm256_and_si256(a, low4);
  q[1] = _mm256_and_si256(b, low4);
  q[2] = _mm256_srli_epi32(a, 4);
  q[3] = _mm256_srli_epi32(b, 4);
}

inline __m256 Fp16Splat(uint16_t h) { return _mm256_set1_ps(HalfToFloat(h)); }

template <typename Group>
void DecodeQ8_0(const BlockQ8_0* b, int64_t nb, Group& group) {
  for (int64_t i = 0; i < nb; ++i) {
    const __m256 d = Fp16Splat(b[i].d);
    __m256 v[4];
    for (int k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * k));
      v[k] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
    }
    group(v[0], v[1], v[2], v[3]);
  }
}

// d * (q - 8) as d * q - 8d: both products are exact and so is their difference, except that a
// zero weight (q = 8) comes out +0 where the scalar d * (q - 8) gives -0 for a negative d. No
// dot product can tell: DotF32's sums start at +0 and adding a zero product never makes -0.
template <typename Group>
void DecodeQ4_0(const BlockQ4_0* b, int64_t nb, Group& group) {
  const __m256 eight = _mm256_set1_ps(8.0f);
  for (int64_t i = 0; i < nb; ++i) {
    const __m256 d = Fp16Splat(b[i].d);
    __m256i q[4];
    Nibbles32(b[i].qs, q);
    Group32(q, d, _mm256_mul_ps(d, eight), group);
  }
}

template <typename Group>
void DecodeQ4_1(const BlockQ4_1* b, int64_t nb, Group& group) {
  for (int64_t i = 0; i < nb; ++i) {
    __m256i q[4];
    Nibbles32(b[i].qs, q);
    Group32(q, Fp16Splat(b[i].d), _mm256_set1_ps(-HalfToFloat(b[i].m)), group);
  }
}

template <typename Group>
void DecodeQ5_0(const BlockQ5_0* b, int64_t nb, Group& group) {
  const __m256i sixteen = _mm256_set1_epi8(16);
  for (int64_t i = 0; i < nb; ++i) {
    const __m256 d = Fp16Splat(b[i].d);
    const __m256i q =
        _mm256_sub_epi8(_mm256_or_si256(Nibbles16(b[i].qs), FifthBits(b[i].qh)), sixteen);
    Group32(q, d, d, group);
  }
}

template <typename Group>
void DecodeQ5_1(const BlockQ5_1* b, int64_t nb, Group& group) {
  for (int64_t i = 0; i < nb; ++i) {
    const __m256 d = Fp16Splat(b[i].d);
    const __m256i q = _mm256_or_si256(Nibbles16(b[i].qs), FifthBits(b[i].qh));
    Group32(q, d, d, _mm256_set1_ps(-HalfToFloat(b[i].m)), group);
  }
}

// Q4_K / Q5_K: chunk c of a super-block is sub-blocks 2c and 2c+1, one group each.
template <typename Block, bool kHighBit, typename Group>
void DecodeQK(const Block* b, int64_t nb, Group& group) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(b[i].d), dmin = HalfToFloat(b[i].dmin);
    [[maybe_unused]] __m256i hbits;
    const __m256i* hp = nullptr;
    if constexpr (kHighBit) {
      hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qh));
      hp = &hbits;
    }
    for (int c = 0; c < 4; ++c) {
      __m256i q[2];
      UnpackKChunk(b[i].qs, hp, c, q);
      for (int s = 0; s < 2; ++s) {
        int sc, m;
        UnpackKScaleMin(b[i].scales, 2 * c + s, &sc, &m);
        const __m256 ds = _mm256_set1_ps(d * sc);
        Group32(q[s], ds, ds, _mm256_set1_ps(dmin * m), group);
      }
    }
  }
}

// Q6_K: each group spans two 16-value sub-blocks with their own scales.
template <typename Group>
void DecodeQ6_K(const BlockQ6_K* b, int64_t nb, Group& group) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(b[i].d);
    for (int h = 0; h < 2; ++h) {
      __m256i q[4];
      UnpackQ6KHalf(b[i], h, q);
      const int8_t* sc = b[i].scales + 8 * h;
      for (int k = 0; k < 4; ++k) {
        Group32(q[k], _mm256_set1_ps(d * sc[2 * k]), _mm256_set1_ps(d * sc[2 * k + 1]), group);
      }
    }
  }
}

// Runs the decoder of block type t over the n values of row; false for a type without one
// (plain float types, unsupported types).
template <typename Group>
bool DecodeBlocks(GgmlType t, const void* row, int64_t n, Group& group) {
  switch (t) {
    case GgmlType::kQ8_0:
      DecodeQ8_0(static_cast<const BlockQ8_0*>(row), n / kQK8_0, group);
      return true;
    case GgmlType::kQ4_0:
      DecodeQ4_0(static_cast<const BlockQ4_0*>(row), n / kQK4_0, group);
      return true;
    case GgmlType::kQ4_1:
      DecodeQ4_1(static_cast<const BlockQ4_1*>(row), n / kQK4_1, group);
      return true;
    case GgmlType::kQ5_0:
      DecodeQ5_0(static_cast<const BlockQ5_0*>(row), n / kQK5_0, group);
      return true;
    case GgmlType::kQ5_1:
      DecodeQ5_1(static_cast<const BlockQ5_1*>(row), n / kQK5_1, group);
      return true;
    case GgmlType::kQ4_K:
      DecodeQK<BlockQ4_K, false>(static_cast<const BlockQ4_K*>(row), n / kQK_K, group);
      return true;
    case GgmlType::kQ5_K:
      DecodeQK<BlockQ5_K, true>(static_cast<const BlockQ5_K*>(row), n / kQK_K, group);
      return true;
    case GgmlType::kQ6_K:
      DecodeQ6_K(static_cast<const BlockQ6_K*>(row), n / kQK_K, group);
      return true;
    default:
      return false;
  }
}

}  // namespace
}  // namespace pinfer::quants::simd
