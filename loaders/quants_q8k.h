// Integer dot products of the K-quant weight formats (Q4_K, Q5_K, Q6_K) with 8-bit activations
// in llama.cpp's Q8_K blocks (issue 17), in three kernel sets: a portable scalar reference, AVX2
// and NEON. The function shapes are quants_int8.h's; MatMul picks a set at run time.
//
// Activations: quantize_q8k(x, out, n) turns one token row x[n] (n a multiple of 256) into n / 256
// BlockQ8_K, as llama.cpp's reference q8_K quantizer: per block, max is the first value of
// largest magnitude, iscale = -127 / max (float division), qs[j] = min(127, round-to-nearest-even
// (iscale * x[j])), so max maps to -127 and every code lies in -127..127; d = 1 / iscale (float
// division); bsums[k] = the sum of qs[16k..16k+15]. A block that is all zero, or whose 127 / max
// overflows float (|max| below about 3.7e-37), gets d = 0 and zero codes and sums (llama.cpp
// leaves the latter undefined). x must be finite. Every set writes the same bytes (tested).
//
// Row dot products (RowDotFn): w_row holds n / 256 weight blocks of the format (quants.h's
// BlockQ4_K / BlockQ5_K / BlockQ6_K), acts + t * act_row_bytes token t's n / 256 BlockQ8_K, and
// y[t * y_stride] receives sum_i w_i * a_i in the quantized values' units (the float dot of the
// dequantized weights with the dequantized activations, up to the rounding below). Per weight
// block and token, the integer sums are exact (int32, no saturation):
//   Q4_K / Q5_K: sumi = sum_j sc[j] * sum_{32 values of sub-block j} q * a,
//                summ = sum_j m[j] * (bsums[2j] + bsums[2j+1]),
//                acc = fma(d_w * d_a, float(sumi), acc); acc = fma(-(dmin_w * d_a), float(summ),
//                acc)
//   Q6_K:        sumi = sum_j sc[j] * sum_{16 values of sub-block j} q * a
//                       - 32 * sum_j sc[j] * bsums[j]   (q the unsigned 6-bit code 0..63),
//                acc = fma(d_w * d_a, float(sumi), acc)
// with d_w, dmin_w the block's fp16 scales as floats, d_a the activation block's scale, products
// rounded to float, acc starting at +0 and taking the blocks in row order. Every set computes
// exactly these floats, so the sets agree bit for bit, and y[t] is bit for bit the same whatever
// n_tok and t (quants_int8.h's batch invariance). The weight row is decoded once per block and
// used for every token (in passes of up to 512 tokens). Pointers need no alignment; n >= 256.
#pragma once

#include <cstdint>

#include "loaders/kernel_set.h"
#include "loaders/quants.h"
#include "loaders/quants_int8.h"

namespace pinfer::quants {

// llama.cpp's block_q8_K: 256 activations as d * qs[j], with the sums of each 16 codes.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block is 292 bytes");

// Bytes of one token's activation row of n values (n a multiple of 256).
inline int64_t Q8KRowBytes(int64_t n) {
  return n / kQK_K * static_cast<int64_t>(sizeof(BlockQ8_K));
}

struct KQuantKernels {
  const char* name;  // "scalar", "avx2", "neon" (+ "-dotprod" where the build has it)
  ActQuantFn quantize_q8k;
  RowDotFn q4_k, q5_k, q6_k;
};

// The portable reference, on every build.
const KQuantKernels& ScalarKQuantKernels();
// The AVX2 set (needs AVX2, FMA and F16C; the caller checks the CPU); nullptr off x86-64.
const KQuantKernels* Avx2KQuantKernels();
// The NEON set (vdotq_s32 where the build targets the dot-product extension, widening
// multiplies otherwise); nullptr off AArch64.
const KQuantKernels* NeonKQuantKernels();
// Set s's table: the AVX2 one for the sets that run AVX2's K-quant kernels (UsesAvx2Kernels),
// NEON's for neon, the scalar one for scalar and where this build lacks the set's table.
const KQuantKernels& KQuantKernelsFor(KernelSet s);

}  // namespace pinfer::quants
