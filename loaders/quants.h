// Quantized block formats with the bit layout llama.cpp uses in GGUF files, their row
// dequantization, reference quantization, and dot products against float vectors.
//
// Every function works on a row of n values (n a multiple of the type's block size; callers
// check this with GgmlRowBytes before calling) and never allocates. Preconditions, not
// checked: src/dst/row/x hold n values (GgmlRowBytes(t, n) bytes for a block row); t is a
// type whose GgmlTypeInfo says supported. For an unsupported t, DequantizeRow writes zeros,
// QuantizeRow writes nothing and DotRow returns 0 (no crash on a file's unexpected type).
// Unaligned pointers are fine.
//
// The kernels run with the process's kernel set (loaders/kernel_set.h: avx2 or scalar, chosen
// at run time; the neon set runs the scalar kernels here). Exact numerics, within each set:
// DotRow(t, row, x, n) == DotF32(DequantizeRow(t, row), x, n) bit for bit, for every type and
// n; DotF32Tile reproduces DotF32 bit for bit too. So a matrix product may decode a weight row
// once and reuse it across many vectors (the batched MatMul) and still give every vector what
// DotRow gives it alone. DequantizeRow gives the same floats in every set (up to the sign of a
// zero Q4_0 weight); DotF32's order of additions is the set's (below), so results of different
// sets agree within rounding only. DotF32 is within 1e-5 * sum_i |w_i x_i| of the exact dot
// (measured: a few 1e-8 for 4096 values).
#pragma once

#include <cstddef>
#include <cstdint>

#include "loaders/ggml_types.h"

namespace pinfer {

constexpr int kQK4_0 = 32, kQK4_1 = 32, kQK5_0 = 32, kQK5_1 = 32, kQK8_0 = 32;
constexpr int kQK_K = 256;        // super-block size of the K-quants
constexpr int kKScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K / Q5_K

// x = d * (q - 8), q in 0..15; low nibbles hold values 0..15, high nibbles 16..31.
struct BlockQ4_0 {
  uint16_t d;  // fp16 scale
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block is 18 bytes");

// x = d * q + m, q in 0..15.
struct BlockQ4_1 {
  uint16_t d, m;  // fp16 scale and min
  uint8_t qs[kQK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block is 20 bytes");

// x = d * (q - 16), q 5 bits: low 4 in qs (as Q4_0), the 5th bit of value j in bit j of qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block is 22 bytes");

struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 block is 24 bytes");

// x = d * q, q int8.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block is 34 bytes");

// 256 values in 8 sub-blocks of 32; x = d * sc[j] * q - dmin * m[j], 6-bit sc/m packed in scales.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block is 144 bytes");

struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block is 176 bytes");

// 256 values in 16 sub-blocks of 16; x = d * scales[j] * (q - 32), q 6 bits (4 in ql, 2 in qh).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block is 210 bytes");

// src: one row of type t holding n values -> dst[n] floats. The avx2 and the scalar sets give
// the same floats (d * q is exact in float for every format; a min or offset is subtracted with
// one rounding), except that a zero Q4_0 weight may be +0 in one and -0 in the other.
void DequantizeRow(GgmlType t, const void* src, float* dst, int64_t n);

// src[n] floats -> one row of type t (round-to-nearest reference quantizers, as llama.cpp's
// *_ref functions choose scales, so a file we quantize matches one quantized without imatrix).
void QuantizeRow(GgmlType t, const float* src, void* dst, int64_t n);

// sum_i dequant(row)[i] * x[i] for one row of type t with n values, as exactly
// DotF32(DequantizeRow(t, row), x, n); in the avx2 set the row is decoded in registers and
// never stored.
float DotRow(GgmlType t, const void* row, const float* x, int64_t n);

// Float dot product of n values, which fixes the rounding of every DotRow. The avx2 set: four
// 8-lane accumulators; accumulator k takes values 32g+8k..32g+8k+7 of every
// whole 32-value group g by fused multiply-add, in order; accumulator 0 then takes the whole
// 8-value pieces after the last group; the sum is ((s0 + s1) + (s2 + s3)) reduced across lanes
// (quants_simd.h HorizontalSum), then the last n % 8 products are added one by one with fused
// multiply-adds. The scalar set: one running sum of the n products, in order.
float DotF32(const float* a, const float* b, int64_t n);

// Batched dot products for matrix products. The dot layout of an n-value vector holds its
// values in the order DotF32 consumes them: accumulator 0's pieces, then accumulator 1's, 2's
// and 3's, then the n % 8 single values (the identity in the scalar set). dst holds n floats.
void ToDotLayout(const float* src, float* dst, int64_t n);

// The dot layout of DequantizeRow(t, row), without the intermediate row.
void DequantizeRowDotLayout(GgmlType t, const void* row, float* dst, int64_t n);

// out[j * out_stride + i] = DotF32(a_i, b_j, n) bit for bit, for the vectors a_i = a + i *
// a_stride (i < na) and b_j = b + j * b_stride (j < nb), each in the dot layout: with a_i from
// DequantizeRowDotLayout and b_j from ToDotLayout that is DotRow(t, row_i, x_j, n).
void DotF32Tile(const float* a, int64_t a_stride, int na, const float* b, int64_t b_stride, int nb,
                int64_t n, float* out, int64_t out_stride);

}  // namespace pinfer
