// Tiled integer GEMM micro-kernels (quants_int8.h's TileDotFn) for the prefill of issue 17: a
// tile of weight rows x tokens whose integer sums and float accumulators stay in registers, so
// each decoded weight block serves every token of the tile and each activation block every row.
// Every kernel is bit for bit its format's row kernel (RowDotFn) per (row, token) pair, so the
// tiled and row paths, and every kernel set, agree exactly (tested in quants_tile_test.cc).
//
// Formats: Q4_K, Q5_K, Q6_K against Q8_K activations (quants_q8k.h's contract and float order);
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 against Q8A activations (quants_q8a.h's).
// The scalar set runs the scalar row kernel row by row (the reference); the AVX2 set tiles 3 rows
// x 4 tokens (an int32 sum vector per pair, in registers), in chunks of tokens whose activations
// stay in L2 while the rows stream past.
#pragma once

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

// The 32-value formats against Q8A activations (quants_q8a.h's contract and float order). The
// AVX2 set tiles 2 rows x 4 tokens, each pair's eight float lanes in a register.
struct Q8ATileKernels {
  const char* name;  // "scalar", "avx2"
  TileDotFn q4_0, q4_1, q5_0, q5_1, q8_0;
};
const Q8ATileKernels& ScalarQ8ATileKernels();
const Q8ATileKernels* Avx2Q8ATileKernels();
// The same tiles with AVX-VNNI dots (bit for bit the AVX2 values); null where not built.
const Q8ATileKernels* AvxVnniQ8ATileKernels();

}  // namespace pinfer::quants
