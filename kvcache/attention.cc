// CPU attention of one query token over the cache. Each cached token's key slice of every kv
// head in range is decoded once (one pass over the rows, row by row) and scored by all query
// heads of its group; softmax is max-subtracted in float32; values are accumulated in token
// order. Blocks are walked in order and each row is
// handled identically, so paged and contiguous layouts give bit-identical results.
#include "kvcache/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "kvcache/kv_codec.h"

namespace pinfer {
namespace {

// Fixed-order dot product: 8 lanes of FMA, then a fixed horizontal sum, then the tail.
float Dot(const float* a, const float* b, int n) {
  int i = 0;
  float sum = 0;
#if defined(__AVX2__) && defined(__FMA__)
  if (n >= 8) {
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8)
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    sum = _mm_cvtss_f32(s);
  }
#endif
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y += p * x (element-wise, so the order per element is the token order).
void Axpy(float p, const float* x, float* y, int n) {
  int i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  const __m256 vp = _mm256_set1_ps(p);
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vp, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
#endif
  for (; i < n; ++i) y[i] = std::fma(p, x[i], y[i]);
}

// Bytes [begin, end) of each row that the kv-head slice reads (rounded out to cache lines).
struct RowSpan {
  size_t begin = 0, end = 0;
};

// Asks the hardware to start loading a block's rows while the previous block is processed:
// a block's rows of one layer are adjacent, but the next block can be anywhere in the pool,
// which the hardware prefetcher cannot guess (a contiguous cache is one long stream).
void PrefetchRows(const uint8_t* first_row, int rows, size_t row_bytes, RowSpan span) {
#if defined(__GNUC__)
  for (int r = 0; r < rows; ++r, first_row += row_bytes) {
    for (size_t b = span.begin; b < span.end; b += 64) __builtin_prefetch(first_row + b, 0, 3);
  }
#else
  (void)first_row, (void)rows, (void)row_bytes, (void)span;
#endif
}

// Calls fn(t - first, row) for the rows of tokens [first, n_ctx) of one layer's keys or values.
template <typename Fn>
void ForEachRow(const KvCache& cache, std::span<const int32_t> table, int layer, int kv, int first,
                int n_ctx, RowSpan span, Fn fn) {
  const int bs = cache.block_size();
  const size_t row_bytes = cache.row_bytes();
  int t = first;
  for (size_t blk = static_cast<size_t>(first / bs); t < n_ctx; ++blk) {
    // A block's rows are adjacent; the first block may be entered part-way.
    const uint8_t* row = cache.Row(table[blk], layer, kv, t % bs);
    const int stop = std::min(n_ctx, (t / bs + 1) * bs);
    if (stop < n_ctx) {
      PrefetchRows(cache.Row(table[blk + 1], layer, kv, 0), std::min(bs, n_ctx - stop), row_bytes,
                   span);
    }
    for (; t < stop; ++t, row += row_bytes) fn(t - first, row);
  }
}

}  // namespace

size_t AttentionScratchFloats(const AttentionShape& s, int n_ctx) {
  // Scores of every query head over the attended positions, plus one decoded row slice.
  const int n_att = s.window > 0 ? std::min(n_ctx, s.window) : n_ctx;
  return static_cast<size_t>(std::max(s.n_heads, 0)) * static_cast<size_t>(std::max(n_att, 0)) +
         static_cast<size_t>(std::max(s.n_kv_heads, 0)) *
             static_cast<size_t>(std::max(s.head_dim, 0));
}

void AttendOne(const KvCache& cache, SeqId seq, int layer, const AttentionShape& s, const float* q,
               int n_ctx, int kv_begin, int kv_end, float* out, float* scratch) {
  if (kv_end <= kv_begin || s.n_kv_heads <= 0 || s.head_dim <= 0 || s.n_heads % s.n_kv_heads) {
    return;  // nothing to compute for a malformed shape (the engine validates shapes at load)
  }
  const int hd = s.head_dim;
  const int group = s.n_heads / s.n_kv_heads;
  const int n_q = (kv_end - kv_begin) * group;  // query heads computed here
  const std::span<const int32_t> table = cache.BlockTable(seq);
  const int64_t n_row = static_cast<int64_t>(s.n_kv_heads) * hd;
  const KvDtype dtype = cache.config().dtype;
  float* out_q = out + static_cast<size_t>(kv_begin) * group * hd;
  const float* q_q = q + static_cast<size_t>(kv_begin) * group * hd;
  std::fill(out_q, out_q + static_cast<size_t>(n_q) * hd, 0.0f);
  // The window: positions [first, n_ctx), n_att of them.
  const int first = s.window > 0 ? std::max(0, n_ctx - s.window) : 0;
  const int n_att = n_ctx - first;
  // A context the sequence does not hold (or storage that is not host memory) yields zeros
  // rather than reading outside the pool.
  if (n_ctx <= 0 || static_cast<int64_t>(table.size()) * cache.block_size() < n_ctx ||
      !cache.Row(table[static_cast<size_t>(first / cache.block_size())], layer, 0, 0)) {
    return;
  }
  float* scores = scratch;  // [n_q][n_att]
  float* row_buf = scratch + static_cast<size_t>(n_q) * static_cast<size_t>(n_att);
  const int64_t slice_begin = static_cast<int64_t>(kv_begin) * hd;
  const int64_t slice_len = static_cast<int64_t>(kv_end - kv_begin) * hd;
  // The bytes of a row the slice touches, in proportion (a prefetch hint, so approximate:
  // block-quantized formats and fp8's row scale may reach one line further).
  const size_t rb = cache.row_bytes();
  RowSpan span;
  span.begin = rb * static_cast<size_t>(slice_begin) / static_cast<size_t>(n_row) / 64 * 64;
  span.end = std::min(
      rb, rb * static_cast<size_t>(slice_begin + slice_len) / static_cast<size_t>(n_row) + 64);
  // Keys: each row's slice for these kv heads is decoded once; every query head of each
  // group scores it.
  const float cap = s.softcap, inv_cap = s.softcap > 0 ? 1.0f / s.softcap : 0.0f;
  ForEachRow(cache, table, layer, 0, first, n_ctx, span, [&](int t, const uint8_t* row) {
    KvDecodeRange(dtype, row, n_row, slice_begin, slice_len, row_buf);
    for (int h = 0; h < n_q; ++h) {
      float dot = Dot(q_q + static_cast<size_t>(h) * hd, row_buf + (h / group) * hd, hd);
      if (cap > 0) dot = cap * std::tanh(dot * inv_cap);
      scores[static_cast<size_t>(h) * n_att + t] = dot * s.scale;
    }
  });
  for (int h = 0; h < n_q; ++h) {
    float* p = scores + static_cast<size_t>(h) * n_att;
    const float mx = *std::max_element(p, p + n_att);
    float sum = 0;
    for (int t = 0; t < n_att; ++t) {
      p[t] = std::exp(p[t] - mx);
      sum += p[t];
    }
    const float inv = 1.0f / sum;
    for (int t = 0; t < n_att; ++t) p[t] *= inv;
  }
  // Values, accumulated in token order.
  ForEachRow(cache, table, layer, 1, first, n_ctx, span, [&](int t, const uint8_t* row) {
    KvDecodeRange(dtype, row, n_row, slice_begin, slice_len, row_buf);
    for (int h = 0; h < n_q; ++h) {
      Axpy(scores[static_cast<size_t>(h) * n_att + t], row_buf + (h / group) * hd,
           out_q + static_cast<size_t>(h) * hd, hd);
    }
  });
}

}  // namespace pinfer
