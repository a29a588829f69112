// Y = X W^T against a weight matrix in its storage type.
#pragma once

#include <span>

#include "absl/status/status.h"
#include "engine/cpu/cpu_workspace.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/weights.h"

namespace pinfer {

struct MatMulOptions {
  // Multiply every format with the float kernels (DotRow), never with 8-bit activations: for
  // comparisons that need the float path's accuracy (the CUDA backend's emulator tests).
  bool float_activations = false;
};

// Whether MatMul quantizes the activations to 8 bits for weights of type t: the formats with
// integer kernels (loaders/quants_q8a.h: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 with 32-value blocks;
// loaders/quants_q8k.h: Q4_K, Q5_K, Q6_K with Q8_K blocks of 256), unless o says float.
bool MatMulInt8Activations(GgmlType t, const MatMulOptions& o = {});

// x: [n_tokens x w.cols] floats, y: [n_tokens x w.rows] floats (row-major, no aliasing).
//
// Two paths, both on the process's kernel set (loaders/kernel_set.h):
//  - 8-bit activations (MatMulInt8Activations): each token's row (gathered first when the
//    matrix has an input permutation) is quantized once into the format's activation blocks
//    (quants_q8a.h's or quants_q8k.h's quantizer) and every weight row is multiplied into the
//    tokens by the format's integer row dot (one pass over each weight row per step, whatever
//    the batch); y[t][r] is that header's row dot, within the activations' rounding of the
//    float dot. Batches of 2 tokens or more take the set's tiled GEMM kernel where it has one
//    (quants_tile.h: the AVX2 set), each worker's rows against all the tokens: the same floats.
//  - float (the other formats, or o.float_activations): every y[t][r] is DotRow(w.row(r), x[t])
//    bit for bit. One token takes the fused DotRow per row; a batch decodes each weight row once
//    (DequantizeRowDotLayout) and multiplies it into every token with DotF32Tile, which by
//    loaders/quants.h's contract gives DotF32(DequantizeRow(row), x_t) == DotRow(row, x_t).
//  - packed (w.packed set: the CPU backend repacked the matrix at load, engine/cpu/repack.h;
//    not with o.float_activations, which multiplies w.data): the tokens' rows quantized once as
//    the packed kernel takes them (Q8A, or Q8_K for the K-quants), then ranges of whole 8-row
//    groups, taken by the workers as chunks (below), each against all the tokens in one call
//    of the set's packed kernel (loaders/quants_packed.h, quants_packed_k.h): y[t][r] is bit
//    for bit the format's integer row dot, as on the 8-bit path.
// Batch-invariant by construction either way: a token's row is quantized on its own and its
// dots do not depend on the other tokens, so a sequence's logits do not depend on which other
// sequences share its step, on how its prompt was chunked, or on whether it was recomputed
// after preemption.
//
// The tokens' rows are prepared (gathered, quantized or laid out for the float tiles) split
// evenly over the pool by token, each row by the same call whatever the split; a single token
// is prepared on the calling thread.
//
// Scratch comes from ws (its kMatMulInput and per-thread kMatMulGather and kMatMulTile
// buffers; MatMulWorkspaceLayout sizes them; the 8-bit rows, at most 1.25 bytes per value, go
// in kMatMulInput, which holds 4): nothing is allocated. FailedPrecondition, naming the
// workspace line, when ws is too small for n_tokens x w.cols or has fewer gather or tile copies
// than the pool has threads (y is then untouched).
absl::Status MatMul(const WeightMatrix& w, const float* x, int n_tokens, float* y, ThreadPool& pool,
                    const CpuWorkspace& ws, const MatMulOptions& o = {});

// One matrix of a MatMulSameInput call and its output, [n_tokens x w->rows] floats.
struct MatMulTarget {
  const WeightMatrix* w = nullptr;
  float* y = nullptr;
};

// Y_j = X W_j^T for up to 4 matrices that take the same input (a layer's Q, K and V; its gate
// and up), every y_j element bit for bit what MatMul(*w_j, x, n_tokens, y_j, ...) gives (the
// same kernels on the same quantized rows), in one pool operation instead of one per matrix:
// the 8-bit activations are quantized once per distinct quantizer (same format family, input
// order and width), and the matrices' row units (packed 8-row groups, 16-row tiles) are cut
// into 8 ranges of equal weight bytes per thread, which the threads take from a shared counter
// (a thread the machine slows down takes fewer; MatMul of one matrix does the same). Falls back to
// one MatMul per matrix (the same floats) when a matrix is on the float path, the widths differ, or
// the quantized sets do not fit kMatMulInput. Workspace errors as MatMul's, checked for every
// matrix before any y is written.
absl::Status MatMulSameInput(std::span<const MatMulTarget> targets, const float* x, int n_tokens,
                             ThreadPool& pool, const CpuWorkspace& ws, const MatMulOptions& o = {});

}  // namespace pinfer
