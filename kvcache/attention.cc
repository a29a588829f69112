// CPU attention of one query token over the cache. For each kv head, every cached key slice is
// decoded once and scored by all query heads of its group; softmax is max-subtracted in
// float32; values are accumulated in token order. Blocks are walked in order and each row is
// handled identically, so paged and contiguous layouts give bit-identical results.
#include "kvcache/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

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

// Calls fn(t, row) for the rows of tokens [0, n_ctx) of one layer's keys or values.
template <typename Fn>
void ForEachRow(const KvCache& cache, std::span<const int32_t> table, int layer, int kv, int n_ctx,
                Fn fn) {
  const int bs = cache.block_size();
  const size_t row_bytes = cache.row_bytes();
  int t = 0;
  for (size_t blk = 0; t < n_ctx; ++blk) {
    const uint8_t* row = cache.Row(table[blk], layer, kv, 0);  // a block's rows are adjacent
    const int stop = std::min(n_ctx, t + bs);
    for (; t < stop; ++t, row += row_bytes) fn(t, row);
  }
}

}  // namespace

size_t AttentionScratchFloats(const AttentionShape& s, int n_ctx) {
  const int group = s.n_kv_heads > 0 ? s.n_heads / s.n_kv_heads : 0;
  return static_cast<size_t>(group) * static_cast<size_t>(std::max(n_ctx, 0)) +
         2 * static_cast<size_t>(s.head_dim);
}

void AttendOne(const KvCache& cache, SeqId seq, int layer, const AttentionShape& s, const float* q,
               int n_ctx, int kv_begin, int kv_end, float* out, float* scratch) {
  const int hd = s.head_dim;
  const int group = s.n_heads / s.n_kv_heads;
  const std::span<const int32_t> table = cache.BlockTable(seq);
  const int64_t n_row = static_cast<int64_t>(s.n_kv_heads) * hd;
  const KvDtype dtype = cache.config().dtype;
  // A context the sequence does not hold (or storage that is not host memory) yields zeros
  // rather than reading outside the pool.
  const bool readable = n_ctx > 0 && cache.Row(table.empty() ? -1 : table[0], layer, 0, 0) &&
                        static_cast<int64_t>(table.size()) * cache.block_size() >= n_ctx;
  float* scores = scratch;
  float* kv_buf = scratch + static_cast<size_t>(group) * static_cast<size_t>(std::max(n_ctx, 0));
  for (int h = kv_begin; h < kv_end; ++h) {
    float* out_h = out + static_cast<size_t>(h) * group * hd;
    std::fill(out_h, out_h + static_cast<size_t>(group) * hd, 0.0f);
    if (!readable) continue;
    const float* q_h = q + static_cast<size_t>(h) * group * hd;
    ForEachRow(cache, table, layer, 0, n_ctx, [&](int t, const uint8_t* row) {
      KvDecodeRange(dtype, row, n_row, static_cast<int64_t>(h) * hd, hd, kv_buf);
      for (int g = 0; g < group; ++g) {
        scores[static_cast<size_t>(g) * n_ctx + t] = Dot(q_h + g * hd, kv_buf, hd) * s.scale;
      }
    });
    for (int g = 0; g < group; ++g) {
      float* p = scores + static_cast<size_t>(g) * n_ctx;
      const float mx = *std::max_element(p, p + n_ctx);
      float sum = 0;
      for (int t = 0; t < n_ctx; ++t) {
        p[t] = std::exp(p[t] - mx);
        sum += p[t];
      }
      const float inv = 1.0f / sum;
      for (int t = 0; t < n_ctx; ++t) p[t] *= inv;
    }
    ForEachRow(cache, table, layer, 1, n_ctx, [&](int t, const uint8_t* row) {
      KvDecodeRange(dtype, row, n_row, static_cast<int64_t>(h) * hd, hd, kv_buf);
      for (int g = 0; g < group; ++g) {
        Axpy(scores[static_cast<size_t>(g) * n_ctx + t], kv_buf, out_h + g * hd, hd);
      }
    });
  }
}

}  // namespace pinfer
