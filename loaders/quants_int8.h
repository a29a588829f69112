// The contract shared by the integer (8-bit activation) dot-product kernels of every quantized
// weight format (issue 17). Each format pairs with one activation format: Q4_0/Q5_0/Q8_0 with
// Q8_0-style blocks, Q4_1/Q5_1 with blocks that also carry their sum, Q4_K/Q5_K/Q6_K with
// Q8_K blocks (256 values, per-16 sums). The activation and kernel tables live beside their
// formats (quants_q8k.h for the K-quants); this header only fixes the function shapes, so
// MatMul can hold any format's kernels in one table entry.
#pragma once

#include <cstdint>

namespace pinfer::quants {

// x[n] floats (one token's row; n a multiple of the activation block) -> out, the row's
// activation blocks (ActRowBytes(n) bytes, written whole). Each token row is quantized on its
// own, so a row's blocks never depend on the other rows of a batch.
using ActQuantFn = void (*)(const float* x, void* out, int64_t n);

// One weight row (n values in the weight format) against n_tok activation rows:
// y[t * y_stride] = dot(w_row, acts + t * act_row_bytes) for t in [0, n_tok). The weight row
// is decoded once and used for every token. Batch invariance: y[t] is bit for bit the same
// whatever n_tok and t (integer block sums are exact; the float sum over blocks keeps one order
// per token), so a batched step gives each sequence what it would get alone.
using RowDotFn = void (*)(const void* w_row, const void* acts, int64_t act_row_bytes, int n_tok,
                          int64_t n, float* y, int64_t y_stride);

// A tile of weight rows against a tile of tokens (the prefill GEMM's micro-kernel, issue 17):
// n_rows weight rows, row r at w + r * w_row_bytes (n values in the weight format), against
// n_tok activation rows (acts + t * act_row_bytes, as for RowDotFn):
//   y[t * y_row_stride + r] = dot(weight row r, activation row t)  for r < n_rows, t < n_tok,
// any n_rows >= 1 and n_tok >= 1 (edges handled inside; nothing else of y is written). Each value
// is bit for bit what the same format's RowDotFn gives for that (row, token) pair (the same
// exact integer block sums, the same float steps in the same order), so a tiled prefill keeps
// batch invariance and agrees with the decode path. The kernel blocks its work for the caches
// (decoded weight blocks reused across a tile's tokens, activation blocks across its rows);
// callers thread over ranges of rows. Pointers need no alignment.
using TileDotFn = void (*)(const void* w, int64_t w_row_bytes, int n_rows, const void* acts,
                           int64_t act_row_bytes, int n_tok, int64_t n, float* y,
                           int64_t y_row_stride);

}  // namespace pinfer::quants
