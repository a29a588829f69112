// Per-format kernels behind the type dispatch of loaders/quants.h (internal to loaders/).
// Every function takes a row of `nb` whole blocks; callers have checked the sizes.
#pragma once

#include <cmath>
#include <cstdint>

#include "loaders/kernel_set.h"
#include "loaders/quants.h"

namespace pinfer::quants {

// Round to nearest, ties to even (the current FP rounding mode, which is never changed here).
inline int NearestInt(float v) { return static_cast<int>(std::nearbyint(v)); }

// Sub-block j (0..7) scale and min of a Q4_K / Q5_K super-block from its 12 packed bytes.
inline void UnpackKScaleMin(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Scalar dequantization of nb blocks.
void DequantQ4_0(const BlockQ4_0* b, float* y, int64_t nb);
void DequantQ4_1(const BlockQ4_1* b, float* y, int64_t nb);
void DequantQ5_0(const BlockQ5_0* b, float* y, int64_t nb);
void DequantQ5_1(const BlockQ5_1* b, float* y, int64_t nb);
void DequantQ8_0(const BlockQ8_0* b, float* y, int64_t nb);
void DequantQ4_K(const BlockQ4_K* b, float* y, int64_t nb);
void DequantQ5_K(const BlockQ5_K* b, float* y, int64_t nb);
void DequantQ6_K(const BlockQ6_K* b, float* y, int64_t nb);

// Reference round-to-nearest quantization of nb blocks.
void QuantQ4_0(const float* x, BlockQ4_0* b, int64_t nb);
void QuantQ4_1(const float* x, BlockQ4_1* b, int64_t nb);
void QuantQ5_0(const float* x, BlockQ5_0* b, int64_t nb);
void QuantQ5_1(const float* x, BlockQ5_1* b, int64_t nb);
void QuantQ8_0(const float* x, BlockQ8_0* b, int64_t nb);
void QuantQ4_K(const float* x, BlockQ4_K* b, int64_t nb);
void QuantQ5_K(const float* x, BlockQ5_K* b, int64_t nb);
void QuantQ6_K(const float* x, BlockQ6_K* b, int64_t nb);

// The float kernels of one kernel set (loaders/kernel_set.h); quants.cc and the batch entry
// points dispatch through the active set's table. Each entry's contract is that of the
// quants.h function it implements, within the set.
struct FloatKernels {
  // Vectorized dequantization of a row of type t with the same floats as the scalar kernels;
  // false (nothing written) where the set has no fast path for t (the scalar set: never).
  bool (*dequantize_fast)(GgmlType t, const void* src, float* dst, int64_t n);
  float (*dot_f32)(const float* a, const float* b, int64_t n);
  // DotRow of the formats other than F32 (whose DotRow is DotF32): DotF32 of the dequantized
  // row, bit for bit. dot_blocks takes the quantized block formats and returns 0 for the others.
  float (*dot_f16)(const uint16_t* w, const float* x, int64_t n);
  float (*dot_bf16)(const uint16_t* w, const float* x, int64_t n);
  float (*dot_blocks)(GgmlType t, const void* row, const float* x, int64_t n);
  void (*to_dot_layout)(const float* src, float* dst, int64_t n);
  void (*dequantize_row_dot_layout)(GgmlType t, const void* row, float* dst, int64_t n);
  void (*dot_f32_tile)(const float* a, int64_t a_stride, int na, const float* b, int64_t b_stride,
                       int nb, int64_t n, float* out, int64_t out_stride);
};

// Plain C++ (quants_dot.cc, quants_dot_batch.cc).
const FloatKernels& ScalarFloatKernels();
// AVX2 + FMA + F16C (quants_*_avx2.cc); nullptr in a build for another architecture.
const FloatKernels* Avx2FloatKernels();
// The set's table (the scalar table for a set without float kernels of its own: neon).
const FloatKernels& FloatKernelsFor(KernelSet s);
// FloatKernelsFor(ActiveKernelSet()).
const FloatKernels& ActiveFloatKernels();

// Scalar dequantization of a row, whatever the set (the scalar set's DequantizeRow).
void DequantizeRowScalar(GgmlType t, const void* src, float* dst, int64_t n);

// The two tables' entries (quants_dot*.cc: scalar; quants_*_avx2.cc: avx2).
namespace scalar {
float DotF32(const float* a, const float* b, int64_t n);
float DotF16(const uint16_t* w, const float* x, int64_t n);
float DotBF16(const uint16_t* w, const float* x, int64_t n);
float DotBlocks(GgmlType t, const void* row, const float* x, int64_t n);
void ToDotLayout(const float* src, float* dst, int64_t n);
void DequantizeRowDotLayout(GgmlType t, const void* row, float* dst, int64_t n);
void DotF32Tile(const float* a, int64_t a_stride, int na, const float* b, int64_t b_stride, int nb,
                int64_t n, float* out, int64_t out_stride);
}  // namespace scalar
namespace avx2 {  // defined for x86-64 builds only
bool DequantizeFast(GgmlType t, const void* src, float* dst, int64_t n);
void ToDotLayout(const float* src, float* dst, int64_t n);
void DequantizeRowDotLayout(GgmlType t, const void* row, float* dst, int64_t n);
void DotF32Tile(const float* a, int64_t a_stride, int na, const float* b, int64_t b_stride, int nb,
                int64_t n, float* out, int64_t out_stride);
}  // namespace avx2

}  // namespace pinfer::quants
