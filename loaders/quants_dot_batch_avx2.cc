// The avx2 set's dot products of many rows against many vectors with DotF32's exact results
// (see the dot layout in quants.h). Each of DotF32's four accumulators is a chain of fused
// multiply-adds over its own 8-value pieces; in the dot layout those pieces are contiguous, so the
// twelve chains of a 3-row x 4-vector block run side by side over one accumulator's pieces at a
// time, with every weight load shared by four vectors and every vector load by three rows (twelve
// independent chains hide the FMA latency; measured about 30% faster than 2 x 4 on Zen 5).
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

// Everything below is compiled for AVX2 + FMA + F16C (see quants_simd.h).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "loaders/quants_decode.h"
#include "loaders/quants_simd.h"

namespace pinfer::quants::avx2 {
namespace {
using namespace simd;

// Where DotF32's operands of an n-value vector sit in the dot layout: accumulator k's pieces
// start at offset[k] (floats) and number pieces[k]; the n % 8 single values are at the end.
struct DotLayout {
  int64_t groups, extra, singles;  // whole 32-value groups, trailing whole pieces, singles
  int64_t offset[4], pieces[4];
  explicit DotLayout(int64_t n) : groups(n / 32), extra(n % 32 / 8), singles(n % 8) {
    offset[0] = 0;
    pieces[0] = groups + extra;
    for (int k = 1; k < 4; ++k) {
      offset[k] = offset[k - 1] + 8 * pieces[k - 1];
      pieces[k] = groups;
    }
  }
};

// Fills the dot layout of a row group by group: group(v0..v3) for the whole 32-value groups in
// order, then tail(src) with the remaining n % 32 values.
struct LayoutWriter {
  const DotLayout& layout;
  float* dst;
  float* next[4];
  LayoutWriter(const DotLayout& l, float* d) : layout(l), dst(d) {
    for (int k = 0; k < 4; ++k) next[k] = d + l.offset[k];
  }
  void operator()(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
    _mm256_storeu_ps(next[0], v0);
    _mm256_storeu_ps(next[1], v1);
    _mm256_storeu_ps(next[2], v2);
    _mm256_storeu_ps(next[3], v3);
    for (float*& p : next) p += 8;
  }
  void Tail(const float* src) {  // next[0] is now where the trailing pieces go
    const int64_t pieces = 8 * layout.extra;
    std::memcpy(next[0], src, static_cast<size_t>(pieces) * sizeof(float));
    std::memcpy(next[3], src + pieces, static_cast<size_t>(layout.singles) * sizeof(float));
  }
};

constexpr int kTileRows = 16;    // rows whose partial sums one pass of vectors fills
constexpr int kTileVectors = 4;  // vectors sharing each weight load
using Partials = __m256[kTileRows][kTileVectors][4];

// One accumulator's chains (pieces from a and b) for NR rows x NT vectors, into part[r][t][k].
template <int NR, int NT>
void Chains(const float* a, int64_t a_stride, const float* b, int64_t b_stride, int64_t pieces,
            Partials& part, int row, int k) {
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r) {
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < 8 * pieces; p += 8) {
    __m256 w[NR];
    for (int r = 0; r < NR; ++r) w[r] = _mm256_loadu_ps(a + r * a_stride + p);
    for (int t = 0; t < NT; ++t) {
      const __m256 x = _mm256_loadu_ps(b + t * b_stride + p);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm256_fmadd_ps(w[r], x, acc[r][t]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    for (int t = 0; t < NT; ++t) part[row + r][t][k] = acc[r][t];
  }
}

using ChainsFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, Partials&, int,
                          int);
constexpr ChainsFn kChains[3][kTileVectors] = {
    {Chains<1, 1>, Chains<1, 2>, Chains<1, 3>, Chains<1, 4>},
    {Chains<2, 1>, Chains<2, 2>, Chains<2, 3>, Chains<2, 4>},
    {Chains<3, 1>, Chains<3, 2>, Chains<3, 3>, Chains<3, 4>}};

}  // namespace

void ToDotLayout(const float* src, float* dst, int64_t n) {
  const DotLayout layout(n);
  LayoutWriter out(layout, dst);
  for (int64_t g = 0; g < layout.groups; ++g, src += 32) {
    out(_mm256_loadu_ps(src), _mm256_loadu_ps(src + 8), _mm256_loadu_ps(src + 16),
        _mm256_loadu_ps(src + 24));
  }
  out.Tail(src);
}

namespace {

// The dot layout of a plain-type row: load8(i) gives values i..i+7 as floats, load1(i) value i.
template <typename Load8, typename Load1>
void PlainDotLayout(Load8 load8, Load1 load1, float* dst, int64_t n) {
  const DotLayout layout(n);
  LayoutWriter out(layout, dst);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) out(load8(i), load8(i + 8), load8(i + 16), load8(i + 24));
  float tail[32];
  for (int64_t k = i; k < n; ++k) tail[k - i] = load1(k);
  out.Tail(tail);
}

}  // namespace

void DequantizeRowDotLayout(GgmlType t, const void* row, float* dst, int64_t n) {
  if (t == GgmlType::kF32) return ToDotLayout(static_cast<const float*>(row), dst, n);
  if (t == GgmlType::kF16) {
    const auto* h = static_cast<const uint16_t*>(row);
    return PlainDotLayout(
        [h](int64_t i) {
          return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
        },
        [h](int64_t i) { return HalfToFloat(h[i]); }, dst, n);
  }
  if (t == GgmlType::kBF16) {
    const auto* h = static_cast<const uint16_t*>(row);
    return PlainDotLayout(
        [h](int64_t i) {
          const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i));
          return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
        },
        [h](int64_t i) { return Bf16ToFp32(h[i]); }, dst, n);
  }
  const DotLayout layout(n);
  LayoutWriter out(layout, dst);
  if (!DecodeBlocks(t, row, n, out)) {  // unsupported: documented zeros
    std::memset(dst, 0, static_cast<size_t>(n) * sizeof(float));
  }
}

void DotF32Tile(const float* a, int64_t a_stride, int na, const float* b, int64_t b_stride, int nb,
                int64_t n, float* out, int64_t out_stride) {
  const DotLayout layout(n);
  Partials part;
  for (int j0 = 0; j0 < nb; j0 += kTileVectors) {
    const int nt = std::min(kTileVectors, nb - j0);
    const float* bj = b + j0 * b_stride;
    for (int i0 = 0; i0 < na; i0 += kTileRows) {
      const int nr = std::min(kTileRows, na - i0);
      const float* ai = a + i0 * a_stride;
      // Accumulator by accumulator, so one accumulator's pieces of the nt vectors stay in
      // cache while the rows pass.
      for (int k = 0; k < 4; ++k) {
        for (int r = 0; r < nr; r += 3) {
          kChains[std::min(3, nr - r) - 1][nt - 1](ai + r * a_stride + layout.offset[k], a_stride,
                                                   bj + layout.offset[k], b_stride,
                                                   layout.pieces[k], part, r, k);
        }
      }
      for (int r = 0; r < nr; ++r) {
        const float* ar = ai + r * a_stride;
        for (int t = 0; t < nt; ++t) {
          const float* bt = bj + t * b_stride;
          float sum = FinishDot(part[r][t][0], part[r][t][1], part[r][t][2], part[r][t][3]);
          for (int64_t i = n - layout.singles; i < n; ++i) sum = FmaScalar(ar[i], bt[i], sum);
          out[(j0 + t) * out_stride + i0 + r] = sum;
        }
      }
    }
  }
}

}  // namespace pinfer::quants::avx2

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

#endif  // x86-64
