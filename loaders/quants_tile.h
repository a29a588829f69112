// Tiled integer GEMM micro-kernels (quants_int8.h's TileDotFn) for the prefill of issue 17: a
// tile of weight rows x tokens whose integer sums and float accumulators stay in registers, so
// each decoded weight block serves every token of the tile and each activation block every row.
// Every kernel is bit for bit its format's row kernel (RowDotFn) per (row, token) pair, so the
// tiled and row paths, and every kernel set, agree exactly (tested in quants_tile_test.cc).
//
// Formats: Q4_K, Q5_K, Q6_K against Q8_K activations (quants_q8k.h's contract and float order).
// The 32-value formats (quants_q8a.h) have no tiles: their batches run the row kernels in token
// chunks, and row-interleaved kernels (vector lanes = rows) take their prefill.
// The scalar set runs the scalar row kernel row by row (the reference); the AVX2 set tiles 3 rows
// x 4 tokens (an int32 sum vector per pair, in registers), in chunks of tokens whose activations
// stay in L2 while the rows stream past.
#pragma once

#include "loaders/kernel_set.h"
#include "loaders/quants_int8.h"

namespace pinfer::quants {

struct KQuantTileKernels {
  const char* name;  // "scalar", "avx2"
  TileDotFn q4_k, q5_k, q6_k;
};

// The portable reference, on every build.
const KQuantTileKernels& ScalarKQuantTileKernels();
// The AVX2 set (needs AVX2, FMA and F16C; the caller checks the CPU); nullptr off x86-64.
const KQuantTileKernels* Avx2KQuantTileKernels();
// The tiles a batch of set s runs, or null where the set has none of its own, so its batches
// take its row kernels (the same floats): the AVX2 tiles for the sets that run AVX2's K-quant
// kernels (UsesAvx2Kernels); null for scalar (its tiles are its row dots, row by row, so they
// would add nothing) and for neon (no NEON tiles: the scalar ones would replace its row kernels).
const KQuantTileKernels* KQuantTileKernelsFor(KernelSet s);

}  // namespace pinfer::quants
