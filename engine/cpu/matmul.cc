#include "engine/cpu/matmul.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "loaders/ggml_types.h"
#include "loaders/quants.h"

namespace pinfer {
namespace {
// F16 / BF16 / F32 batches smaller than this take the per-token DotRow: laying their rows out
// costs more than it saves (measured on Zen 5: F16 x 4 tokens 1.6 ms per token-by-token pass
// against 2.0 ms batched, break-even near 6 tokens).
constexpr int kPlainBatchFrom = 8;

absl::Status CheckWorkspace(const WeightMatrix& w, int n_tokens, const ThreadPool& pool,
                            const CpuWorkspace& ws) {
  const uint64_t cols = static_cast<uint64_t>(w.cols);
  const bool tile_per_thread = ws.Get(CpuBuffer::kMatMulTile, pool.size() - 1) != nullptr;
  if (cols * static_cast<uint64_t>(n_tokens) > ws.capacity(CpuBuffer::kMatMulInput) ||
      cols > ws.capacity(CpuBuffer::kMatMulGather) ||
      cols * kMatMulTileRows > ws.capacity(CpuBuffer::kMatMulTile) || !tile_per_thread) {
    return absl::FailedPreconditionError(absl::StrCat(
        "MatMul of ", n_tokens, " tokens x ", w.cols, " inputs (", w.name, ") on ", pool.size(),
        " threads needs more than the workspace line's matmul scratch holds (",
        ws.bytes_per_copy(CpuBuffer::kMatMulInput),
        " bytes of inputs); the workspace was sized "
        "for fewer tokens, narrower matrices or fewer threads"));
  }
  return absl::OkStatus();
}

// Token t's inputs in the stored matrix's column order: out[k] = x_t[perm[k]].
void Gather(const WeightMatrix& w, const float* xt, float* out) {
  for (int64_t k = 0; k < w.cols; ++k) out[k] = xt[w.input_perm[static_cast<size_t>(k)]];
}

}  // namespace

absl::Status MatMul(const WeightMatrix& w, const float* x, int n_tokens, float* y, ThreadPool& pool,
                    const CpuWorkspace& ws) {
  if (absl::Status s = CheckWorkspace(w, n_tokens, pool, ws); !s.ok()) return s;
  const bool permuted = !w.input_perm.empty();
  float* inputs = ws.Get(CpuBuffer::kMatMulInput);
  const int64_t n_tiles = (w.rows + kMatMulTileRows - 1) / kMatMulTileRows;
  const int64_t cols = w.cols;
  // One token (and a few, for the plain float formats, whose fused DotRow costs no more than a
  // float dot): each row decoded in registers straight into its dot, token by token.
  const int batch_from = GgmlTypeInfoOf(w.type).block_size == 1 ? kPlainBatchFrom : 2;
  if (n_tokens < batch_from) {
    // The inputs in the stored column order, gathered once per token before any dot runs, so
    // every y[t][r] sees the same x'_t whatever the batch.
    if (permuted) {
      for (int t = 0; t < n_tokens; ++t) Gather(w, x + t * cols, inputs + t * cols);
      x = inputs;
    }
    pool.ParallelFor(n_tiles, [&](int64_t begin, int64_t end, int) {
      const int64_t r0 = begin * kMatMulTileRows, r1 = std::min(w.rows, end * kMatMulTileRows);
      for (int t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * cols;
        float* yt = y + t * w.rows;
        for (int64_t r = r0; r < r1; ++r) yt[r] = DotRow(w.type, w.row(r), xt, cols);
      }
    });
    return absl::OkStatus();
  }
  // A batch: every token's inputs and every weight row in the dot layout, each row decoded
  // once for all the tokens.
  float* xl = inputs;
  float* gathered = ws.Get(CpuBuffer::kMatMulGather);
  for (int t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * cols;
    if (permuted) {
      Gather(w, xt, gathered);
      xt = gathered;
    }
    ToDotLayout(xt, xl + t * cols, cols);
  }
  pool.ParallelFor(n_tiles, [&](int64_t begin, int64_t end, int thread) {
    float* wl = ws.Get(CpuBuffer::kMatMulTile, thread);
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t r0 = tile * kMatMulTileRows, r1 = std::min(w.rows, r0 + kMatMulTileRows);
      for (int64_t r = r0; r < r1; ++r) {
        DequantizeRowDotLayout(w.type, w.row(r), wl + (r - r0) * cols, cols);
      }
      DotF32Tile(wl, cols, static_cast<int>(r1 - r0), xl, cols, n_tokens, cols, y + r0, w.rows);
    }
  });
  return absl::OkStatus();
}

}  // namespace pinfer
