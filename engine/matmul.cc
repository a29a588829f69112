#include "engine/matmul.h"

#include <algorithm>
#include <vector>

#include "loaders/quants.h"

namespace pinfer {

namespace {
constexpr int64_t kTileRows = 16;  // weight rows kept hot while the batch's tokens pass over

// The inputs in the stored matrix's column order: x'[t][k] = x[t][perm[k]]. Gathered once per
// token per call into the calling thread's scratch, before any DotRow runs, so every y[t][r]
// still sees the same x'_t whatever the batch.
const float* GatherInputs(const WeightMatrix& w, const float* x, int n_tokens) {
  thread_local std::vector<float> scratch;
  const size_t cols = static_cast<size_t>(w.cols);
  if (scratch.size() < cols * static_cast<size_t>(n_tokens)) {
    scratch.resize(cols * static_cast<size_t>(n_tokens));
  }
  for (int t = 0; t < n_tokens; ++t) {
    const float* xt = x + cols * static_cast<size_t>(t);
    float* out = scratch.data() + cols * static_cast<size_t>(t);
    for (size_t k = 0; k < cols; ++k) out[k] = xt[w.input_perm[k]];
  }
  return scratch.data();
}

}  // namespace

void MatMul(const WeightMatrix& w, const float* x, int n_tokens, float* y, ThreadPool& pool) {
  if (!w.input_perm.empty()) x = GatherInputs(w, x, n_tokens);
  const int64_t n_tiles = (w.rows + kTileRows - 1) / kTileRows;
  pool.ParallelFor(n_tiles, [&](int64_t begin, int64_t end, int) {
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t r0 = tile * kTileRows, r1 = std::min(w.rows, r0 + kTileRows);
      for (int t = 0; t < n_tokens; ++t) {
        const float* xt = x + static_cast<int64_t>(t) * w.cols;
        float* yt = y + static_cast<int64_t>(t) * w.rows;
        for (int64_t r = r0; r < r1; ++r) yt[r] = DotRow(w.type, w.row(r), xt, w.cols);
      }
    }
  });
}

}  // namespace pinfer
