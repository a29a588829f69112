#include "engine/matmul.h"

#include <algorithm>

#include "loaders/quants.h"

namespace pinfer {

namespace {
constexpr int64_t kTileRows = 16;  // weight rows kept hot while the batch's tokens pass over
}

void MatMul(const WeightMatrix& w, const float* x, int n_tokens, float* y, ThreadPool& pool) {
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
