// Row-packed K-quant weights (Q4_K, Q5_K, Q6_K) and their integer kernels against Q8_K
// activations (issue 17): the weight rows of a matrix in groups of kPackKRows = 8, each
// super-block of 256 values of the group's 8 rows stored together so that one 256-bit vector
// holds the same 4 values of all 8 rows (one 32-bit lane per row). The kernels put rows in the
// vector lanes (16 rows, two groups, in a 512-bit vector), broadcast the activations, apply the
// sub-block scales and the float steps as vectors and never reduce horizontally.
//
// Results: every kernel gives, for each (row r, token t), bit for bit what quants_q8k.h's row
// kernel (RowDotFn) of the same format gives on the file's row r and the token's Q8_K row: the
// same exact int32 sums per super-block, the same float steps in the same order (see
// quants_q8k.h's contract). So the packed and unpacked paths, and every kernel set, agree.
//
// Matrix layout (PackKRows): group g (rows 8g..8g+7) at dst + g * PackedKGroupBytes(t, n), its
// n / 256 packed super-blocks in order. A last group with fewer than 8 rows is padded with zero
// bytes (zero scales: those rows' values are +0, never stored). The packed bytes are exactly
// 8x the file's block bytes per super-block (a permutation of the file's bytes; no pre-decoded
// scales), so the ledger's bytes for a packed matrix are ceil(rows / 8) * 8 * row bytes.
//
// One packed super-block of 8 rows (r = row in the group, 0..7), every field a byte permutation
// of the 8 file blocks:
//   Q4_K (1152 bytes): d[r], dmin[r] (fp16, as the file's);
//     scales[w][r][4]  = the file's scales[4w..4w+3] of row r (w = 0..2: the 12 packed 6-bit
//                        scale/min bytes as three 32-bit words per row, row in lane);
//     qs[c][k][r][4]   = the file's qs[32c + 4k .. 32c + 4k + 3] of row r (c = 0..3, k = 0..7):
//                        low nibbles are values 64c + 4k + i (sub-block 2c), high nibbles
//                        64c + 32 + 4k + i (sub-block 2c + 1), i = 0..3.
//   Q5_K (1408 bytes): as Q4_K, with qh[k][r][4] = the file's qh[4k..4k+3] of row r (k = 0..7;
//                        bit j of byte 4k + i is the fifth bit of value 32j + 4k + i) between
//                        scales and qs.
//   Q6_K (1680 bytes): d[r] (fp16); scales[j][r] (int8, j = 0..15, sub-blocks of 16);
//     ql[h][c][k][r][4] = the file's ql[64h + 32c + 4k .. +3] of row r (h, c = 0..1, k = 0..7):
//                        low nibbles are values 128h + 32c + 4k + i, high nibbles 128h + 64 +
//                        32c + 4k + i;
//     qh[h][k][r][4]    = the file's qh[32h + 4k .. +3] of row r: bits 2q, 2q + 1 of byte i are
//                        the top two bits of value 128h + 32q + 4k + i.
//
// Kernel shape (PackedDotFn, as loaders/quants_packed.h's): w the packed matrix (n_rows rows in
// consecutive 8-row groups), acts + t * act_row_bytes token t's n / 256 BlockQ8_K (quants_q8k.h's
// quantize_q8k), y[t * y_row_stride + r] = the row kernel's value for (row r, token t) for r <
// n_rows, t < n_tok (any n_tok >= 1; 1 is decode); nothing else of y is written. The kernels tile
// rows x tokens themselves (register blocks of one or two groups x several tokens, in token
// chunks whose activations stay in L2) and stream each group once per chunk. Callers thread over
// ranges of whole groups. Pointers need no alignment; n a multiple of 256.
#pragma once

#include <cstdint>

#include "loaders/ggml_types.h"
#include "loaders/kernel_set.h"
#include "loaders/quants.h"
#include "loaders/quants_packed.h"

namespace pinfer::quants {

inline constexpr int kPackKRows = kPackRows;  // quants_packed.h's groups
static_assert(kPackKRows == 8, "the layout below has 8 rows per group");

struct PackedQ4_K {
  uint16_t d[kPackKRows], dmin[kPackKRows];
  uint8_t scales[3][kPackKRows][4];
  uint8_t qs[4][8][kPackKRows][4];
};
static_assert(sizeof(PackedQ4_K) == kPackKRows * sizeof(BlockQ4_K), "packed Q4_K is 8 blocks");

struct PackedQ5_K {
  uint16_t d[kPackKRows], dmin[kPackKRows];
  uint8_t scales[3][kPackKRows][4];
  uint8_t qh[8][kPackKRows][4];
  uint8_t qs[4][8][kPackKRows][4];
};
static_assert(sizeof(PackedQ5_K) == kPackKRows * sizeof(BlockQ5_K), "packed Q5_K is 8 blocks");

struct PackedQ6_K {
  uint16_t d[kPackKRows];
  int8_t scales[16][kPackKRows];
  uint8_t ql[2][2][8][kPackKRows][4];
  uint8_t qh[2][8][kPackKRows][4];
};
static_assert(sizeof(PackedQ6_K) == kPackKRows * sizeof(BlockQ6_K), "packed Q6_K is 8 blocks");

// Whether t is one of the packed K-quant types (Q4_K, Q5_K, Q6_K).
bool HasPackedKLayout(GgmlType t);
// Bytes of one 8-row group of n values (n a multiple of 256): n / 256 packed super-blocks.
int64_t PackedKGroupBytes(GgmlType t, int64_t n);
// Bytes of n_rows packed rows: ceil(n_rows / 8) groups.
int64_t PackedKBytes(GgmlType t, int64_t n_rows, int64_t n);

// n_rows file rows of type t (row r at src + r * src_row_bytes, n values each) -> dst
// (PackedKBytes(t, n_rows, n) bytes, written whole; the last group's missing rows zero).
void PackKRows(GgmlType t, const void* src, int64_t src_row_bytes, int64_t n_rows, int64_t n,
               void* dst);
// The inverse: packed rows -> n_rows file rows at dst + r * dst_row_bytes (tests, tools).
void UnpackKRows(GgmlType t, const void* packed, int64_t n_rows, int64_t n, void* dst,
                 int64_t dst_row_bytes);

// One packed row: row r (r < 8 * groups) of the packed matrix at packed -> dst (the file's
// row, GgmlRowBytes(t, n) bytes). quants_packed.h's UnpackRow for these types.
void UnpackKRow(GgmlType t, const void* packed, int64_t r, int64_t n, void* dst);

// quants_packed.h's PackRows, HasPackedLayout, PackedGroupBytes, PackedBytes and UnpackRow
// take these types too (they call the functions above). The kernels have quants_packed.h's
// PackedDotFn shape.
struct PackedKQuantKernels {
  const char* name;  // "scalar", "avx2", "avxvnni", "avx512vnni", "neon"
  PackedDotFn q4_k, q5_k, q6_k;
};

// The portable reference (decodes each packed block and runs quants_q8k.h's per-block steps).
const PackedKQuantKernels& ScalarPackedKQuantKernels();
// AVX2 + FMA + F16C (vpmaddubsw / vpmaddwd); null off x86-64. The caller checks the CPU.
const PackedKQuantKernels* Avx2PackedKQuantKernels();
// AVX-VNNI (256-bit vpdpbusd / vpdpwssd); null off x86-64.
const PackedKQuantKernels* AvxVnniPackedKQuantKernels();
// AVX-512 F/BW/VL/VNNI: 16 rows (two groups) per 512-bit vector; null off x86-64. The caller
// checks the CPU (kernel_set.h's CpuRunsAvx512Vnni).
const PackedKQuantKernels* Avx512VnniPackedKQuantKernels();
#if defined(__aarch64__)
// NEON: SDOT by element where the CPU has the dot-product extension, widening multiplies
// otherwise (AArch64 builds only: PackedKQuantKernelsFor(KernelSet::kNeon) is null elsewhere).
const PackedKQuantKernels* NeonPackedKQuantKernels();
#endif

// The packed kernels of kernel set s (scalar: the reference, as quants_packed.h's Q8A table),
// or null where this build has none for s (the neon set off AArch64).
const PackedKQuantKernels* PackedKQuantKernelsFor(KernelSet s);
// The entry of type t in k; null for a type without one.
PackedDotFn PackedKDot(const PackedKQuantKernels& k, GgmlType t);

}  // namespace pinfer::quants
