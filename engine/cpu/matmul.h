// Y = X W^T against a weight matrix in its storage type.
#pragma once

#include "absl/status/status.h"
#include "engine/cpu/cpu_workspace.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/weights.h"

namespace pinfer {

// x: [n_tokens x w.cols] floats, y: [n_tokens x w.rows] floats (row-major, no aliasing).
//
// Batch-invariant by construction: every y[t][r] is DotRow(w.row(r), x[t]) bit for bit whatever
// the batch, so a sequence's logits do not depend on which other sequences share its step, on
// how its prompt was chunked, or on whether it was recomputed after preemption. One token takes
// the fused DotRow per row; a batch decodes each weight row once (DequantizeRowDotLayout) and
// multiplies it into every token with DotF32Tile, which by loaders/quants.h's contract gives
// DotF32(DequantizeRow(row), x_t) == DotRow(row, x_t) for each token.
//
// Scratch comes from ws (its kMatMulInput, kMatMulGather and per-thread kMatMulTile buffers;
// MatMulWorkspaceLayout sizes them): nothing is allocated. FailedPrecondition, naming the
// workspace line, when ws is too small for n_tokens x w.cols or has fewer tile copies than
// the pool has threads (y is then untouched).
absl::Status MatMul(const WeightMatrix& w, const float* x, int n_tokens, float* y, ThreadPool& pool,
                    const CpuWorkspace& ws);

}  // namespace pinfer
