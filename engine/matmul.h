// Y = X W^T against a weight matrix in its storage type.
#pragma once

#include "engine/thread_pool.h"
#include "engine/weights.h"

namespace pinfer {

// x: [n_tokens x w.cols] floats, y: [n_tokens x w.rows] floats (row-major, no aliasing).
//
// Batch-invariant by construction: every y[t][r] is DotRow(w.row(r), x[t]) whatever the batch,
// so a sequence's logits do not depend on which other sequences share its step, on how its
// prompt was chunked, or on whether it was recomputed after preemption. Batches only change
// the loop order: a tile of weight rows stays in cache while every token passes over it.
void MatMul(const WeightMatrix& w, const float* x, int n_tokens, float* y, ThreadPool& pool);

}  // namespace pinfer
