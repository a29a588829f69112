// The vector attention kernels, written once over an instruction set's traits S (internal to
// kvcache/; included by attention_kernels_avx2.cc and attention_kernels_neon.cc only, after
// their target pragmas, so that everything here is compiled for that instruction set; they
// include this file's own includes before the pragma, so that no inline function of a shared
// header is compiled for the instruction set: the linker keeps any one copy of such a function,
// and a CPU without the instruction set must never run that one).
//
// S provides a vector V of 8 floats and:
//   V Zero(); V Set(float); V Load(const float*); void Store(float*, V);
//   V Add(V, V); V Sub(V, V); V Mul(V, V); V Fma(V a, V b, V c) (a * b + c, one rounding);
//   V Fnma(V a, V b, V c) (c - a * b, one rounding); V Min(V, V); V Max(V, V);
//   V Round(V) (to nearest, ties to even); V Pow2(V n) (2^n for integral n in [-126, 127]);
//   float Sum(V) (horizontal, a fixed order); float Half(uint16_t) (IEEE half to float);
//   V F16(const uint8_t*), V Bf16(const uint8_t*): 8 encoded values;
//   V I8(const int8_t*): 8 signed bytes; V Nibbles(const uint8_t*, bool high): 8 nibbles
//   (the low or high halves of 8 bytes), 0..15, as floats.
// Every loader decodes a value exactly as KvDecodeRange does (the same conversion, and for
// block formats the same product of the block's scale and the quantized value), so the value
// sums are bit-identical to the scalar set's and only the dot products' order differs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kvcache/attention_kernels.h"
#include "kvcache/kv_codec.h"
#include "loaders/quants.h"

namespace pinfer::attention::simd {

// Loaders: values [i, i + 8) of an encoded row (i a multiple of 8) as floats.
template <class S>
struct LoadF32 {
  typename S::V operator()(const uint8_t* row, int64_t i) const {
    return S::Load(reinterpret_cast<const float*>(row) + i);
  }
};
template <class S>
struct LoadF16 {
  typename S::V operator()(const uint8_t* row, int64_t i) const { return S::F16(row + 2 * i); }
};
template <class S>
struct LoadBf16 {
  typename S::V operator()(const uint8_t* row, int64_t i) const { return S::Bf16(row + 2 * i); }
};
template <class S>
struct LoadQ8_0 {  // d * q
  typename S::V operator()(const uint8_t* row, int64_t i) const {
    const uint8_t* blk = row + i / kQK8_0 * static_cast<int64_t>(sizeof(BlockQ8_0));
    uint16_t d;
    std::memcpy(&d, blk + offsetof(BlockQ8_0, d), 2);
    const auto* qs = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ8_0, qs));
    return S::Mul(S::Set(S::Half(d)), S::I8(qs + i % kQK8_0));
  }
};
template <class S>
struct LoadQ4_0 {  // d * (nibble - 8); values 0..15 are the low nibbles, 16..31 the high ones
  typename S::V operator()(const uint8_t* row, int64_t i) const {
    const uint8_t* blk = row + i / kQK4_0 * static_cast<int64_t>(sizeof(BlockQ4_0));
    uint16_t d;
    std::memcpy(&d, blk + offsetof(BlockQ4_0, d), 2);
    const int o = static_cast<int>(i % kQK4_0);
    const typename S::V q = S::Nibbles(blk + offsetof(BlockQ4_0, qs) + (o & 15), o >= 16);
    return S::Mul(S::Set(S::Half(d)), S::Sub(q, S::Set(8.0f)));
  }
};

// G heads x T tokens starting at token j0: the T rows are loaded once per 8 values and each
// is multiplied into G accumulators.
template <class S, int G, int T, class Load>
void ScoreBlock(Load load, const HeadRows& k, const float* q, float scale, float* scores, int j0) {
  typename S::V acc[G][T];
  for (int g = 0; g < G; ++g) {
    for (int t = 0; t < T; ++t) acc[g][t] = S::Zero();
  }
  for (int i = 0; i < k.hd; i += 8) {
    typename S::V kv[T];
    for (int t = 0; t < T; ++t) kv[t] = load(k.rows[j0 + t], k.begin + i);
    for (int g = 0; g < G; ++g) {
      const typename S::V qv = S::Load(q + static_cast<size_t>(g) * k.hd + i);
      for (int t = 0; t < T; ++t) acc[g][t] = S::Fma(qv, kv[t], acc[g][t]);
    }
  }
  for (int g = 0; g < G; ++g) {
    for (int t = 0; t < T; ++t) scores[g * kTile + j0 + t] = S::Sum(acc[g][t]) * scale;
  }
}

template <class S, int G, class Load>
void ScoreHeads(Load load, const HeadRows& k, const float* q, float scale, float* scores) {
  constexpr int T = G >= 4 ? 8 / G : 4;  // G * T <= 8 accumulators
  int j = 0;
  for (; j + T <= k.n; j += T) ScoreBlock<S, G, T>(load, k, q, scale, scores, j);
  for (; j < k.n; ++j) ScoreBlock<S, G, 1>(load, k, q, scale, scores, j);
}

// acc[g][i .. i + 8C) += p[g][j] * V_j[i .. i + 8C) over the tile's tokens in order: the
// same fused multiply-adds, in the same order per element, as the scalar set.
template <class S, int G, int C, class Load>
void AccumulateBlock(Load load, const HeadRows& v, const float* p, float* acc, int i) {
  typename S::V a[G][C];
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < C; ++c) a[g][c] = S::Load(acc + g * v.hd + i + 8 * c);
  }
  for (int j = 0; j < v.n; ++j) {
    typename S::V x[C];
    for (int c = 0; c < C; ++c) x[c] = load(v.rows[j], v.begin + i + 8 * c);
    for (int g = 0; g < G; ++g) {
      const typename S::V w = S::Set(p[g * kTile + j]);
      for (int c = 0; c < C; ++c) a[g][c] = S::Fma(w, x[c], a[g][c]);
    }
  }
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < C; ++c) S::Store(acc + g * v.hd + i + 8 * c, a[g][c]);
  }
}

template <class S, int G, class Load>
void AccumulateHeads(Load load, const HeadRows& v, const float* p, float* acc) {
  constexpr int C = G >= 4 ? 8 / G : 4;
  int i = 0;
  for (; i + 8 * C <= v.hd; i += 8 * C) AccumulateBlock<S, G, C>(load, v, p, acc, i);
  for (; i < v.hd; i += 8) AccumulateBlock<S, G, 1>(load, v, p, acc, i);
}

// Query heads in groups of 8, 4, 2 and 1 (a head's sums are the same in any group).
template <class S, class Load>
void ScoreAll(Load load, const HeadRows& k, const float* q, int n_q, float scale, float* s) {
  const auto at = [&](int head) { return q + static_cast<size_t>(head) * k.hd; };
  int h = 0;
  for (; h + 8 <= n_q; h += 8) ScoreHeads<S, 8>(load, k, at(h), scale, s + h * kTile);
  if (h + 4 <= n_q) ScoreHeads<S, 4>(load, k, at(h), scale, s + h * kTile), h += 4;
  if (h + 2 <= n_q) ScoreHeads<S, 2>(load, k, at(h), scale, s + h * kTile), h += 2;
  if (h < n_q) ScoreHeads<S, 1>(load, k, at(h), scale, s + h * kTile);
}

template <class S, class Load>
void AccumulateAll(Load load, const HeadRows& v, const float* p, int n_q, float* acc) {
  const auto at = [&](int head) { return acc + static_cast<size_t>(head) * v.hd; };
  int h = 0;
  for (; h + 8 <= n_q; h += 8) AccumulateHeads<S, 8>(load, v, p + h * kTile, at(h));
  if (h + 4 <= n_q) AccumulateHeads<S, 4>(load, v, p + h * kTile, at(h)), h += 4;
  if (h + 2 <= n_q) AccumulateHeads<S, 2>(load, v, p + h * kTile, at(h)), h += 2;
  if (h < n_q) AccumulateHeads<S, 1>(load, v, p + h * kTile, at(h));
}

// Runs fn(load, rows) with the loader of the rows' format; formats without one (fp8: a table
// lookup per value) are decoded into buf first and read as f32 rows.
template <class S, class Fn>
void WithLoader(const HeadRows& r, float* buf, Fn fn) {
  switch (r.dtype) {
    case KvDtype::kF32:
      return fn(LoadF32<S>{}, r);
    case KvDtype::kF16:
      return fn(LoadF16<S>{}, r);
    case KvDtype::kBF16:
      return fn(LoadBf16<S>{}, r);
    case KvDtype::kQ8_0:
      return fn(LoadQ8_0<S>{}, r);
    case KvDtype::kQ4_0:
      return fn(LoadQ4_0<S>{}, r);
    case KvDtype::kFp8E4M3:
      break;
  }
  const uint8_t* decoded[kTile];
  for (int j = 0; j < r.n; ++j) {
    float* dst = buf + static_cast<size_t>(j) * r.hd;
    KvDecodeRange(r.dtype, r.rows[j], r.n_row, r.begin, r.hd, dst);
    decoded[j] = reinterpret_cast<const uint8_t*>(dst);
  }
  HeadRows f32 = r;
  f32.rows = decoded;
  f32.dtype = KvDtype::kF32;
  f32.n_row = r.hd;
  f32.begin = 0;
  fn(LoadF32<S>{}, f32);
}

// Head slices that are not whole vectors (head_dim not a multiple of 8) go to the scalar set.
template <class S>
void Score(const HeadRows& k, const float* q, int n_q, float scale, float* scores, float* buf) {
  if (k.hd % 8 != 0 || k.begin % 8 != 0) {
    return ScalarAttentionKernels().score(k, q, n_q, scale, scores, buf);
  }
  WithLoader<S>(k, buf, [&](auto load, const HeadRows& rows) {
    ScoreAll<S>(load, rows, q, n_q, scale, scores);
  });
}

template <class S>
void Accumulate(const HeadRows& v, const float* p, int n_q, float* acc, float* buf) {
  if (v.hd % 8 != 0 || v.begin % 8 != 0) {
    return ScalarAttentionKernels().accumulate(v, p, n_q, acc, buf);
  }
  WithLoader<S>(
      v, buf, [&](auto load, const HeadRows& rows) { AccumulateAll<S>(load, rows, p, n_q, acc); });
}

// exp(x) for x in [-87.3, 88]: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, so r is
// exact), exp(r) = 1 + r + r^2 P(r) with Cephes' degree-5 P, times 2^n. Within a few ulp of
// std::exp over that range (tested); smaller x give exp(-87.3), about 1e-38, not 0.
template <class S>
typename S::V Exp(typename S::V x) {
  x = S::Min(S::Max(x, S::Set(-87.3f)), S::Set(88.0f));
  const typename S::V n = S::Round(S::Mul(x, S::Set(1.44269504088896341f)));
  typename S::V r = S::Fnma(n, S::Set(0.693359375f), x);
  r = S::Fnma(n, S::Set(-2.12194440e-4f), r);
  typename S::V p = S::Set(1.9875691500e-4f);
  p = S::Fma(p, r, S::Set(1.3981999507e-3f));
  p = S::Fma(p, r, S::Set(8.3334519073e-3f));
  p = S::Fma(p, r, S::Set(4.1665795894e-2f));
  p = S::Fma(p, r, S::Set(1.6666665459e-1f));
  p = S::Fma(p, r, S::Set(5.0000001201e-1f));
  const typename S::V y = S::Fma(p, S::Mul(r, r), S::Add(r, S::Set(1.0f)));
  return S::Mul(y, S::Pow2(n));
}

template <class S>
float ExpSum(float* s, int n, float m) {
  const typename S::V vm = S::Set(m);
  typename S::V sum = S::Zero();
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const typename S::V e = Exp<S>(S::Sub(S::Load(s + j), vm));
    S::Store(s + j, e);
    sum = S::Add(sum, e);
  }
  float total = S::Sum(sum);
  if (j < n) {  // the tail through the same Exp, padded with m
    float pad[8];
    for (int i = 0; i < 8; ++i) pad[i] = j + i < n ? s[j + i] : m;
    S::Store(pad, Exp<S>(S::Sub(S::Load(pad), vm)));
    for (int i = 0; j + i < n; ++i) total += (s[j + i] = pad[i]);
  }
  return total;
}

}  // namespace pinfer::attention::simd
