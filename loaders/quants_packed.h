// Row-interleaved ("packed") weights of the 32-value formats and their kernels against Q8A
// activations (issue 17, CPU speed): 8 weight rows per group, so one 256-bit register holds 4
// bytes of each of the 8 rows, and a token's 4 activation bytes broadcast to every lane
// multiply all 8 rows at once (u8 x s8 dot into int32 lanes = rows: no horizontal sums).
//
// Layout. A matrix of rows x n values (n a multiple of 32) becomes ceil(rows / 8) groups of 8
// rows, consecutive; a group holds its n / 32 blocks in column order; block b of a group:
//   Q4_0: BlockQ4_0x8 { uint16_t d[8]; uint8_t qs[128]; }            (144 bytes)
//   Q4_1: BlockQ4_1x8 { uint16_t d[8]; uint16_t m[8]; uint8_t qs[128]; } (160 bytes)
//   Q8_0: BlockQ8_0x8 { uint16_t d[8]; uint8_t qs[256]; }            (272 bytes)
// d[i] (m[i]) is row i's fp16 field of its block b, and
//   Q4_0 / Q4_1: qs[32c + 4i + k] = row i's original qs[4c + k]            (c < 4, k < 4),
//     so the chunk at 32c holds, for every row, the codes 4c..4c+3 in its low nibbles and
//     16+4c..16+4c+3 in its high nibbles (unsigned, 0..15, as stored);
//   Q8_0: qs[32c + 4i + k] = row i's original qs[4c + k] + 128 as a byte (c < 8, k < 4):
//     unsigned 0..255, the code plus 128 (the bit pattern with its top bit flipped), so an
//     unsigned x signed dot (vpdpbusd) takes it directly and the kernel subtracts
//     128 * sum_a, exactly.
// A last group with fewer than 8 rows has zero blocks for the missing rows (d = 0 (and m = 0),
// every code 0: bytes 0, Q8_0's codes 0x80).
//
// Numerics (the Q8A per-block contract of quants_q8a.h): per row, token and block b, the exact
// int32 i_b = sum_j q_j a_j (q the stored code: unsigned nibbles for Q4_0 / Q4_1, signed for
// Q8_0), Q4_0: i_b -= 8 * sum_a; then acc = fma(d_w * d_a, float(i_b), acc) (the product
// rounded to float), Q4_1: then acc = fma(m_w * d_a, float(sum_a), acc); acc starts at +0 and
// takes the blocks in row order; y = acc. Every set's packed kernel gives exactly these floats
// for every (row, token) pair, whatever n_rows, n_tok and the pair's place in the call.
#pragma once

#include <cstdint>

#include "loaders/ggml_types.h"
#include "loaders/kernel_set.h"

namespace pinfer::quants {

constexpr int kPackRows = 8;  // rows per group

struct BlockQ4_0x8 {
  uint16_t d[kPackRows];
  uint8_t qs[16 * kPackRows];
};
static_assert(sizeof(BlockQ4_0x8) == 144, "packed Q4_0 block is 144 bytes");

struct BlockQ4_1x8 {
  uint16_t d[kPackRows];
  uint16_t m[kPackRows];
  uint8_t qs[16 * kPackRows];
};
static_assert(sizeof(BlockQ4_1x8) == 160, "packed Q4_1 block is 160 bytes");

struct BlockQ8_0x8 {
  uint16_t d[kPackRows];
  uint8_t qs[32 * kPackRows];  // code + 128
};
static_assert(sizeof(BlockQ8_0x8) == 272, "packed Q8_0 block is 272 bytes");

// Whether type t has a packed layout (Q4_0, Q4_1, Q8_0; and Q4_K, Q5_K, Q6_K, whose layout and
// kernels are quants_packed_k.h's: the functions below take them too).
bool HasPackedLayout(GgmlType t);
// Bytes of one 8-row group of n values (n a multiple of 32); 0 for a type without a layout.
int64_t PackedGroupBytes(GgmlType t, int64_t n);
// Bytes of rows x n values packed: ceil(rows / 8) groups.
int64_t PackedBytes(GgmlType t, int64_t rows, int64_t n);

// Rows [0, n_rows) of type t (row r at src + r * src_row_bytes, n values each) -> packed
// groups at dst (PackedBytes(t, n_rows, n) bytes, all written); the last group's missing rows
// are zero blocks. Callers may split the work by whole groups (src and dst advanced by 8 rows /
// one group). t must have a layout; no alignment needed.
void PackRows(GgmlType t, const void* src, int64_t src_row_bytes, int64_t n_rows, int64_t n,
              void* dst);
// The inverse, for tests and tools: row r (r < 8 * groups) of the packed matrix at w -> dst
// (GgmlRowBytes(t, n) bytes, the original row).
void UnpackRow(GgmlType t, const void* w, int64_t r, int64_t n, void* dst);

// The kernel: y[t * y_row_stride + r] = dot(row r, token t) for r < n_rows, t < n_tok, where row
// r lives in group r / 8 of w (groups consecutive, n_rows <= 8 * the groups there) and token t's
// Q8A row (quants_q8a.h) at acts + t * act_row_bytes; exactly the floats of the header comment
// (bit for bit the format's RowDotFn). Any n_tok >= 1 (the kernel tiles tokens and groups for
// the caches and registers itself; n_tok = 1 is decode), n_rows >= 1. Nothing else of y is
// written. No alignment needed.
using PackedDotFn = void (*)(const void* w, int64_t n_rows, const void* acts, int64_t act_row_bytes,
                             int n_tok, int64_t n, float* y, int64_t y_row_stride);

struct PackedQ8AKernels {
  const char* name;              // the kernel set's name
  PackedDotFn q4_0, q4_1, q8_0;  // null entry: none
};

// The portable reference (every build).
const PackedQ8AKernels& ScalarPackedQ8AKernels();
// AVX2 + FMA + F16C (maddubs / madd); null off x86-64.
const PackedQ8AKernels* Avx2PackedQ8AKernels();
// AVX-VNNI (256-bit vpdpbusd); null where not built.
const PackedQ8AKernels* AvxVnniPackedQ8AKernels();
// AVX-512 F/BW/VL/VNNI (512-bit vpdpbusd, 16 rows per register); null where not built.
const PackedQ8AKernels* Avx512VnniPackedQ8AKernels();
#if defined(__aarch64__)
// NEON: SDOT by element where the CPU has the dot-product extension, widening multiplies
// otherwise (AArch64 builds only: PackedQ8AKernelsFor(KernelSet::kNeon) is null elsewhere).
const PackedQ8AKernels* NeonPackedQ8AKernels();
#endif
// The table of set s; null: this set has no packed kernels.
const PackedQ8AKernels* PackedQ8AKernelsFor(KernelSet s);
// The entry of type t in k; null for a type without one.
PackedDotFn PackedDot(const PackedQ8AKernels& k, GgmlType t);

}  // namespace pinfer::quants
