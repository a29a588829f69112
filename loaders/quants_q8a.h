// Integer dot products of the 32-value weight formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) with 8-bit
// activations (issue 17), in three kernel sets: a portable scalar reference, AVX2 and NEON. The
// function shapes are quants_int8.h's; MatMul picks the set of the process (kernel_set.h).
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
// dequantized weights with the dequantized activations, computed as follows. Per weight block b
// and token: q_j is the weight's integer code as stored, unsigned for the nibble formats (Q4_0,
// Q4_1: 0..15; Q5_0, Q5_1: 0..31) and signed for Q8_0; a_j the activation codes; the eight lane
// sums i_l = sum_{k<4} q_{4l+k} a_{4l+k} (l < 8) are exact int32;
//   s_b = d_w * d_a (float product), and for every lane acc[l] = fma(s_b, float(i_l), acc[l]);
//   the offset: Q4_0 (x = d (q - 8)): corr = fma(-8 s_b, float(sum_a), corr);
//               Q5_0 (x = d (q - 16)): corr = fma(-16 s_b, float(sum_a), corr);
//               Q4_1 / Q5_1 (x = d q + m): corr = fma(m_w * d_a, float(sum_a), corr); Q8_0: none;
// with d_w, m_w the block's fp16 fields as floats, acc and corr starting at +0 and taking the
// blocks in row order. Then y = (((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 +
// acc7))) + corr. Every set computes exactly these floats (the lanes are AVX2's 8 x int32 of
// maddubs + madd and NEON's two vdotq, or vmull_s8 with two pairwise adds), so the sets agree
// bit for bit, and y[t] is bit for bit the same whatever n_tok and t (quants_int8.h's batch
// invariance). The weight row is decoded once per block and used for every token of the call.
// Pointers need no alignment; n >= 32.
//
// Accuracy against the float dot of the dequantized weights with the float activations: the
// activation codes carry the rounding (at most d_a / 2 per value), so the error is about
// sum_j |w_j| d_a / 2 / sqrt(3) (random rounding); quants_q8a_test states and measures it.
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
// The set's table (scalar where this build has no such set).
const Q8AKernels& Q8AKernelsFor(KernelSet s);

// The row dot of weight type t in table k; nullptr for a type without one.
RowDotFn Q8ARowDot(const Q8AKernels& k, GgmlType t);

}  // namespace pinfer::quants
