// CPU attention of one query token over the cache: tiles of kTile positions, walked in order
// from the window's first position (0 without a sliding window); per tile the kernels score every
// query head of the kv heads in range against the keys, the running maximum and sum of each head
// are updated (online softmax: earlier sums are rescaled when the maximum grows), and the weighted
// values are added into the output, which is divided by the sum at the end. Tiles are cut in token
// positions, not blocks, and every row is handled identically, so paged and contiguous
// layouts give bit-identical results.
#include "kvcache/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kvcache/attention_kernels.h"

namespace pinfer {
namespace {

using attention::AttentionKernels;
using attention::HeadRows;
using attention::kTile;

// Rows per kernel call within a tile, and how many rows ahead of the chunk being read the
// prefetches ask for (at most kTile: the rows of the next tile are the last known).
constexpr int kChunk = 16;
constexpr int kAhead = 32;

// Bytes [begin, end) of each row that the kv heads in range read (rounded out to lines).
struct RowSpan {
  size_t begin = 0, end = 0;
};

// Rows of tokens [t0, t0 + n) of one layer's keys (kv 0) or values (kv 1).
void TileRows(const KvCache& cache, std::span<const int32_t> table, int layer, int kv, int t0,
              int n, const uint8_t** rows) {
  const int bs = cache.block_size();
  const size_t row_bytes = cache.row_bytes();
  for (int t = t0; t < t0 + n;) {
    const int blk = t / bs;
    const uint8_t* row = cache.Row(table[static_cast<size_t>(blk)], layer, kv, t % bs);
    const int stop = std::min(t0 + n, (blk + 1) * bs);  // a block's rows are adjacent
    for (; t < stop; ++t, row += row_bytes) rows[t - t0] = row;
  }
}

// Asks the hardware to start loading rows a step before they are read: a block's rows of one
// layer are adjacent, but the next block can be anywhere in the pool, which the hardware
// prefetcher cannot guess (a contiguous cache is one long stream).
void Prefetch(const uint8_t* const* rows, int n, RowSpan span) {
#if defined(__GNUC__)
  for (int j = 0; j < n; ++j) {
    for (size_t b = span.begin; b < span.end; b += 64) __builtin_prefetch(rows[j] + b, 0, 3);
  }
#else
  (void)rows, (void)n, (void)span;
#endif
}

RowSpan SpanOf(const KvCache& cache, int64_t n_row, int64_t slice_begin, int64_t slice_len) {
  // In proportion: block formats and fp8's row scale may reach one line further.
  const size_t rb = cache.row_bytes();
  RowSpan span;
  span.begin = rb * static_cast<size_t>(slice_begin) / static_cast<size_t>(n_row) / 64 * 64;
  span.end = std::min(
      rb, rb * static_cast<size_t>(slice_begin + slice_len) / static_cast<size_t>(n_row) + 64);
  return span;
}

// One head's online-softmax step over a tile's scores s[0, n): the running maximum m and sum
// l, and the head's accumulated values acc[hd] rescaled when m grows; s becomes the weights.
void UpdateSoftmax(const AttentionKernels& k, float* s, int n, float* m, float* l, float* acc,
                   int hd) {
  float mx = *m;
  for (int j = 0; j < n; ++j) mx = std::max(mx, s[j]);
  if (mx > *m) {
    if (*m != -std::numeric_limits<float>::infinity()) {
      const float c = std::exp(*m - mx);
      *l *= c;
      for (int i = 0; i < hd; ++i) acc[i] *= c;
    }
    *m = mx;
  }
  *l += k.exp_sum(s, n, *m);
}

bool Valid(const AttentionShape& s, int kv_begin, int kv_end) {
  return s.n_kv_heads > 0 && s.head_dim > 0 && s.n_heads > 0 && s.n_heads % s.n_kv_heads == 0 &&
         kv_begin >= 0 && kv_end <= s.n_kv_heads && kv_begin < kv_end;
}

// The tiles of one query's window: rows found through the block table, scored, the softmax
// updated and the values added, tile after tile.
struct TileWalk {
  const AttentionKernels& k;
  const KvCache& cache;
  std::span<const int32_t> table;
  int layer;
  const AttentionShape& s;
  int group, kv_begin, kv_end;
  HeadRows rows;  // dtype, n_row and hd set; rows, n and begin per call
  RowSpan span;   // the bytes of a row the kv heads in range read

  // Scores of keys [j0, j0 + n) of the tile (rows[0, n)) for every query head in range,
  // soft-capped when asked.
  void Score(const uint8_t* const* rows_at, int j0, int n, const float* q, float* scores,
             float* buf) {
    const float scale = s.softcap > 0 ? 1.0f : s.scale;  // a cap comes before the scale
    rows.rows = rows_at;
    rows.n = n;
    for (int kv = kv_begin; kv < kv_end; ++kv) {
      const int h0 = (kv - kv_begin) * group;
      rows.begin = int64_t{kv} * s.head_dim;
      k.score(rows, q + static_cast<size_t>(h0) * s.head_dim, group, scale,
              scores + static_cast<size_t>(h0) * kTile + j0, buf);
    }
    if (s.softcap <= 0) return;
    const float cap = s.softcap, inv_cap = 1.0f / s.softcap;
    for (int h = 0; h < (kv_end - kv_begin) * group; ++h) {
      float* p = scores + static_cast<size_t>(h) * kTile + j0;
      for (int j = 0; j < n; ++j) p[j] = cap * std::tanh(p[j] * inv_cap) * s.scale;
    }
  }

  // Adds the weighted values of the tile's tokens [j0, j0 + n) (rows[0, n)) in token order.
  void Accumulate(const uint8_t* const* rows_at, int j0, int n, const float* p, float* out,
                  float* buf) {
    rows.rows = rows_at;
    rows.n = n;
    for (int kv = kv_begin; kv < kv_end; ++kv) {
      const int h0 = (kv - kv_begin) * group;
      rows.begin = int64_t{kv} * s.head_dim;
      k.accumulate(rows, p + static_cast<size_t>(h0) * kTile + j0, group,
                   out + static_cast<size_t>(h0) * s.head_dim, buf);
    }
  }

  // Positions [first, end): out (unnormalised), m and l hold the online softmax's state.
  // A tile's keys are scored, and its values added, a chunk of kChunk rows at a time; before
  // each chunk the keys (or values) kAhead rows further on are prefetched, so the requests are
  // spread over the tile rather than issued in one burst that the core's miss buffers cannot
  // hold. The chunks only cut the calls: every sum runs in the same order as over the whole
  // tile.
  void Run(int first, int end, const float* q, float* scores, float* m, float* l, float* out,
           float* buf) {
    const int n_q = (kv_end - kv_begin) * group;
    // Rows of this tile [0, kTile) and the next one [kTile, 2 kTile).
    const uint8_t* k_rows[2 * kTile];
    const uint8_t* v_rows[2 * kTile];
    const int n_first = std::min(kTile, end - first);
    TileRows(cache, table, layer, 0, first, n_first, k_rows + kTile);
    TileRows(cache, table, layer, 1, first, n_first, v_rows + kTile);
    Prefetch(k_rows + kTile, std::min(kAhead, n_first), span);
    for (int t0 = first; t0 < end; t0 += kTile) {
      const int n = std::min(kTile, end - t0);
      std::copy(k_rows + kTile, k_rows + kTile + n, k_rows);
      std::copy(v_rows + kTile, v_rows + kTile + n, v_rows);
      const int n_next = std::max(0, std::min(kTile, end - t0 - kTile));  // n == kTile if > 0
      TileRows(cache, table, layer, 0, t0 + kTile, n_next, k_rows + kTile);
      TileRows(cache, table, layer, 1, t0 + kTile, n_next, v_rows + kTile);
      const int n_rows = n + n_next;  // rows known, this tile's and the next one's
      for (int j0 = 0; j0 < n; j0 += kChunk) {
        const int a = j0 + kAhead;
        // The first tile's values: asked for while its keys are scored.
        if (t0 == first) Prefetch(v_rows + j0, std::min(kChunk, n - j0), span);
        if (a < n_rows) Prefetch(k_rows + a, std::min(kChunk, n_rows - a), span);
        Score(k_rows + j0, j0, std::min(kChunk, n - j0), q, scores, buf);
      }
      for (int h = 0; h < n_q; ++h) {
        UpdateSoftmax(k, scores + static_cast<size_t>(h) * kTile, n, &m[h], &l[h],
                      out + static_cast<size_t>(h) * s.head_dim, s.head_dim);
      }
      for (int j0 = 0; j0 < n; j0 += kChunk) {
        const int a = j0 + kAhead;
        if (a < n_rows) Prefetch(v_rows + a, std::min(kChunk, n_rows - a), span);
        Accumulate(v_rows + j0, j0, std::min(kChunk, n - j0), scores, out, buf);
      }
    }
  }
};

}  // namespace

size_t AttentionScratchFloats(const AttentionShape& s) {
  // Per query head: a tile of scores, its maximum and sum; one tile of decoded head slices.
  const size_t heads = static_cast<size_t>(std::max(s.n_heads, 0));
  return heads * (kTile + 2) + static_cast<size_t>(kTile) * std::max(s.head_dim, 0);
}

namespace attention {

void AttendOneWith(const AttentionKernels& k, const KvCache& cache, SeqId seq, int layer,
                   const AttentionShape& s, const float* q, int n_ctx, int kv_begin, int kv_end,
                   float* out, float* scratch) {
  if (!Valid(s, kv_begin, kv_end)) return;  // the engine validates shapes at load
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads;
  const int n_q = (kv_end - kv_begin) * group;  // query heads computed here
  float* out_q = out + static_cast<size_t>(kv_begin) * group * hd;
  const float* q_q = q + static_cast<size_t>(kv_begin) * group * hd;
  std::fill(out_q, out_q + static_cast<size_t>(n_q) * hd, 0.0f);
  // The layer's own table: a window layer's may have let the blocks before its window go.
  const std::span<const int32_t> table = cache.LayerBlockTable(seq, layer);
  // The window: positions [first, n_ctx); rows before it are never read.
  const int first = s.window > 0 ? std::max(0, n_ctx - s.window) : 0;
  // A context the sequence does not hold (or storage that is not host memory) yields zeros
  // rather than reading outside the pool.
  if (n_ctx <= 0 || static_cast<int64_t>(table.size()) * cache.block_size() < n_ctx ||
      !cache.Row(table[static_cast<size_t>(first / cache.block_size())], layer, 0, 0)) {
    return;
  }
  float* scores = scratch;                               // [n_q][kTile]
  float* m = scores + static_cast<size_t>(n_q) * kTile;  // [n_q] running maxima
  float* l = m + n_q;                                    // [n_q] running sums
  float* buf = l + n_q;                                  // [kTile][hd]
  std::fill(m, m + n_q, -std::numeric_limits<float>::infinity());
  std::fill(l, l + n_q, 0.0f);
  HeadRows rows;
  rows.dtype = cache.config().dtype;
  rows.n_row = int64_t{s.n_kv_heads} * hd;
  rows.hd = hd;
  const RowSpan span =
      SpanOf(cache, rows.n_row, int64_t{kv_begin} * hd, int64_t{kv_end - kv_begin} * hd);
  TileWalk walk{k, cache, table, layer, s, group, kv_begin, kv_end, rows, span};
  walk.Run(first, n_ctx, q_q, scores, m, l, out_q, buf);
  for (int h = 0; h < n_q; ++h) {
    const float inv = 1.0f / l[h];
    float* o = out_q + static_cast<size_t>(h) * hd;
    for (int i = 0; i < hd; ++i) o[i] *= inv;
  }
}

}  // namespace attention

int KvHeadsPerItem(int n_kv_heads, int n_tokens, int n_threads) {
  if (n_kv_heads <= 1) return 1;
  // Items per token: enough for n_threads (one token: its heads cost the same, so an even
  // split needs no more), or 4 per thread (tokens of different context lengths, balanced by
  // dynamic chunks); the fewest that divide the heads evenly.
  const int64_t want = n_tokens <= 1 ? n_threads : 4 * int64_t{n_threads};
  const int64_t per_token = std::max<int64_t>(1, (want + n_tokens - 1) / std::max(n_tokens, 1));
  int items = static_cast<int>(std::min<int64_t>(per_token, n_kv_heads));
  while (n_kv_heads % items != 0) ++items;
  return n_kv_heads / items;
}

void AttendOne(const KvCache& cache, SeqId seq, int layer, const AttentionShape& s, const float* q,
               int n_ctx, int kv_begin, int kv_end, float* out, float* scratch) {
  attention::AttendOneWith(attention::ActiveAttentionKernels(), cache, seq, layer, s, q, n_ctx,
                           kv_begin, kv_end, out, scratch);
}

}  // namespace pinfer
