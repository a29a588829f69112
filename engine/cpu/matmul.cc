#include "engine/cpu/matmul.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "loaders/ggml_types.h"
#include "loaders/quants.h"

namespace pinfer {

namespace {
constexpr int64_t kTileRows = 16;  // weight rows decoded together while the batch passes over
// F16 / BF16 / F32 batches smaller than this take the per-token DotRow: laying their rows out
// costs more than it saves (measured on Zen 5: F16 x 4 tokens 1.6 ms per token-by-token pass
// against 2.0 ms batched, break-even near 6 tokens).
constexpr int kPlainBatchFrom = 8;

// A thread's scratch grown to n floats, 64-byte aligned so that the 8-float pieces of the dot
// layouts never straddle a cache line.
float* Scratch(std::vector<float>& v, size_t n) {
  constexpr size_t kAlign = 64 / sizeof(float);
  if (v.size() < n + kAlign) v.resize(n + kAlign);
  const size_t misaligned = reinterpret_cast<uintptr_t>(v.data()) % 64 / sizeof(float);
  return v.data() + (misaligned == 0 ? 0 : kAlign - misaligned);
}

// The inputs in the stored matrix's column order: x'[t][k] = x[t][perm[k]]. Gathered once per
// token per call into the calling thread's scratch, before any dot product runs, so every
// y[t][r] still sees the same x'_t whatever the batch.
const float* GatherInputs(const WeightMatrix& w, const float* x, int n_tokens) {
  thread_local std::vector<float> scratch;
  const size_t cols = static_cast<size_t>(w.cols);
  float* out = Scratch(scratch, cols * static_cast<size_t>(n_tokens));
  for (int t = 0; t < n_tokens; ++t) {
    const float* xt = x + cols * static_cast<size_t>(t);
    float* ot = out + cols * static_cast<size_t>(t);
    for (size_t k = 0; k < cols; ++k) ot[k] = xt[w.input_perm[k]];
  }
  return out;
}

}  // namespace

void MatMul(const WeightMatrix& w, const float* x, int n_tokens, float* y, ThreadPool& pool) {
  if (!w.input_perm.empty()) x = GatherInputs(w, x, n_tokens);
  const int64_t n_tiles = (w.rows + kTileRows - 1) / kTileRows;
  const int64_t cols = w.cols;
  // One token (and a few, for the plain float formats, whose fused DotRow costs no more than a
  // float dot): each row decoded in registers straight into its dot, token by token.
  const int batch_from = GgmlTypeInfoOf(w.type).block_size == 1 ? kPlainBatchFrom : 2;
  if (n_tokens < batch_from) {
    pool.ParallelFor(n_tiles, [&](int64_t begin, int64_t end, int) {
      const int64_t r0 = begin * kTileRows, r1 = std::min(w.rows, end * kTileRows);
      for (int t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * cols;
        float* yt = y + t * w.rows;
        for (int64_t r = r0; r < r1; ++r) yt[r] = DotRow(w.type, w.row(r), xt, cols);
      }
    });
    return;
  }
  // A batch: every token's inputs and every weight row in the dot layout, each row decoded
  // once for all the tokens.
  thread_local std::vector<float> inputs;
  float* xl = Scratch(inputs, static_cast<size_t>(cols) * static_cast<size_t>(n_tokens));
  for (int t = 0; t < n_tokens; ++t) ToDotLayout(x + t * cols, xl + t * cols, cols);
  pool.ParallelFor(n_tiles, [&](int64_t begin, int64_t end, int) {
    thread_local std::vector<float> rows;
    float* wl = Scratch(rows, static_cast<size_t>(kTileRows * cols));
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t r0 = tile * kTileRows, r1 = std::min(w.rows, r0 + kTileRows);
      for (int64_t r = r0; r < r1; ++r) {
        DequantizeRowDotLayout(w.type, w.row(r), wl + (r - r0) * cols, cols);
      }
      DotF32Tile(wl, cols, static_cast<int>(r1 - r0), xl, cols, n_tokens, cols, y + r0, w.rows);
    }
  });
}

}  // namespace pinfer
