// Integer dot products of the 32-value weight formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) with 8-bit
// activations (issue 17), in four tables: a portable scalar reference, AVX2, AVX-VNNI (which the
// avx512vnni kernel set also takes) and NEON. The function shapes are quants_int8.h's; MatMul
// picks the table of the process's kernel set (kernel_set.h, Q8AKernelsFor below).
//
// Activations: QuantizeQ8A(x, out, n) turns one token row x[n] (n a multiple of 32) into n / 32
// BlockQ8A: per block, amax = max |x_j|, d = amax / 127 (float division), id = d != 0 ? 1 / d : 0,
// qs[j] = round-to-nearest-even(x_j * id) (|qs[j]| <= 127), sum = the sum of the 32 codes; the
// stored scale is d rounded to the nearest half-precision value (as llama.cpp stores its q8_0 and
// q8_1 activation scales, so a Q8_0 or Q4_0 row's integer sums and scale products are llama.cpp's)
// when d is a normal half (kQ8AHalfMin <= d <= kQ8AHalfMax), else d itself (no overflow to
// infinity, no flush of tiny rows). x must be finite. Every set writes the same bytes (tested).
//
// Row dot products (RowDotFn): w_row holds n / 32 weight blocks of the format, acts + t *
// act_row_bytes token t's n / 32 BlockQ8A, and y[t * y_stride] receives the dot of the
// dequantized weights with the dequantized activations, computed as follows (llama.cpp's own
// per-block order, sumi * d_w * d_a, with an fma). Per weight block b and token: q_j is the
// weight's integer code as stored, unsigned for the nibble formats (Q4_0, Q4_1: 0..15; Q5_0,
// Q5_1: 0..31) and signed for Q8_0; a_j the activation codes; sum_a the activation block's stored
// sum of codes; the block's integer sum is the exact int32
//   i_b = sum_{j<32} q_j a_j,  less 8 sum_a for Q4_0 (x = d (q - 8)), 16 sum_a for Q5_0
//   (x = d (q - 16)),
// so |i_b| <= 32 x 128 x 127 < 2^24 and float(i_b) is exact. With d_w (and m_w) the block's fp16
// fields as floats, d_a the activation block's stored scale, every product rounded to float:
//   Q4_0, Q5_0, Q8_0:  acc = fma(d_w * d_a, float(i_b), acc)
//   Q4_1, Q5_1:        acc = fma(d_w * d_a, float(i_b), acc); acc = fma(m_w * d_a, float(sum_a),
//   acc)
// acc starts at +0 and takes the blocks in row order; y = acc. Every set computes exactly these
// floats (the sets differ only in how they form the exact i_b: AVX2's maddubs + madd or
// AVX-VNNI's vpdpbusd, NEON's vdotq or widening multiplies, then integer reductions of several
// blocks together), so the sets agree bit for bit, and y[t] is bit for bit the same whatever
// n_tok and t (quants_int8.h's batch invariance). A kernel that lays several weight rows out
// together (vector lanes = rows) can compute the same floats, since each (row, token) pair is
// one scalar chain. The weight row is decoded once per block and used for every token of the
// call. Pointers need no alignment; n >= 32.
//
// Accuracy against the float dot of the dequantized weights with the float activations: the
// activation codes carry the rounding (at most d_a / 2 per value), so the error is about
// sum_j |w_j| d_a / 2 / sqrt(3) (random rounding); the float steps add at most one rounding per
// fma and product (relative 2^-24 each, n / 16 of them on the chain). quants_q8a_test states the
// bound |y - ref| <= sum_b (1 + 2^-11) (d_a,b / 2) sum_{j in b} |w_j| + (2^-11 + 1e-5) sum_j
// |w_j x_j| (n <= 4096) and measures the error.
#pragma once

#include <cstdint>

#include "loaders/kernel_set.h"
#include "loaders/quants.h"
#include "loaders/quants_int8.h"

namespace pinfer::quants {

constexpr int kQK8A = 32;
// The normal half-precision range the stored activation scale is rounded within.
constexpr float kQ8AHalfMin = 6.103515625e-05f, kQ8AHalfMax = 65504.0f;

// 32 activations as d * qs[j], with the sum of the codes (the offset formats' correction).
struct BlockQ8A {
  float d;
  int32_t sum;
  int8_t qs[kQK8A];
};
static_assert(sizeof(BlockQ8A) == 40, "Q8A block is 40 bytes");

// Bytes of one token's activation row of n values (n a multiple of 32).
inline int64_t Q8ARowBytes(int64_t n) { return n / kQK8A * static_cast<int64_t>(sizeof(BlockQ8A)); }

struct Q8AKernels {
  const char* name;  // "scalar", "avx2", "neon" (+ "-dotprod" where the build has it)
  ActQuantFn quantize;
  RowDotFn q4_0, q4_1, q5_0, q5_1, q8_0;
};

// The portable reference, on every build.
const Q8AKernels& ScalarQ8AKernels();
// The AVX2 set (needs AVX2, FMA and F16C; the caller checks the CPU); nullptr off x86-64.
const Q8AKernels* Avx2Q8AKernels();
// The same kernels with AVX-VNNI dots (bit for bit Avx2Q8AKernels()'s values); null where not
// built.
const Q8AKernels* AvxVnniQ8AKernels();
// The NEON set; nullptr off AArch64.
const Q8AKernels* NeonQ8AKernels();
// Set s's table: avxvnni's (the AVX2 one where the compiler has no AVX-VNNI: the same values),
// for avx512vnni the AVX-VNNI one where the CPU runs AVX-VNNI (VEX) else the AVX2 one, avx2's,
// neon's, the scalar one for scalar and where this build lacks the set's table.
const Q8AKernels& Q8AKernelsFor(KernelSet s);

// The row dot of weight type t in table k; nullptr for a type without one.
RowDotFn Q8ARowDot(const Q8AKernels& k, GgmlType t);

}  // namespace pinfer::quants
