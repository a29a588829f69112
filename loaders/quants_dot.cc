// The scalar set's dot products, and the dispatch of DotF32 and the float kernel tables
// (quants_internal.h). The scalar set dequantizes a block at a time and continues DotF32's
// single running sum over it; the avx2 set's kernels are in quants_dot_avx2.cc.
#include <algorithm>
#include <cmath>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

namespace pinfer {
namespace quants {
namespace scalar {
namespace {

// Out of line so that every caller adds with the same instructions.
[[gnu::noinline]] float SumProducts(const float* a, const float* b, int64_t n, float sum) {
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Dequantizes a block (or 256 plain values) at a time and carries the sum across them.
float DotViaDequantize(GgmlType t, const void* row, const float* x, int64_t n) {
  const int64_t block = GgmlTypeInfoOf(t).block_size;
  const int64_t chunk = block > 1 ? block : 256;
  float buf[256], sum = 0.0f;
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t len = std::min(chunk, n - i);
    DequantizeRowScalar(t, static_cast<const uint8_t*>(row) + GgmlRowBytes(t, i), buf, len);
    sum = SumProducts(buf, x + i, len, sum);
  }
  return sum;
}

bool DequantizeFast(GgmlType, const void*, float*, int64_t) { return false; }

}  // namespace

float DotF32(const float* a, const float* b, int64_t n) { return SumProducts(a, b, n, 0.0f); }

float DotF16(const uint16_t* w, const float* x, int64_t n) {
  return DotViaDequantize(GgmlType::kF16, w, x, n);
}
float DotBF16(const uint16_t* w, const float* x, int64_t n) {
  return DotViaDequantize(GgmlType::kBF16, w, x, n);
}
float DotBlocks(GgmlType t, const void* row, const float* x, int64_t n) {
  if (!GgmlTypeInfoOf(t).supported || GgmlTypeInfoOf(t).block_size == 1) return 0.0f;
  return DotViaDequantize(t, row, x, n);
}

}  // namespace scalar

const FloatKernels& ScalarFloatKernels() {
  static constexpr FloatKernels kScalar = {scalar::DequantizeFast,
                                           scalar::DotF32,
                                           scalar::DotF16,
                                           scalar::DotBF16,
                                           scalar::DotBlocks,
                                           scalar::ToDotLayout,
                                           scalar::DequantizeRowDotLayout,
                                           scalar::DotF32Tile};
  return kScalar;
}

const FloatKernels& FloatKernelsFor(KernelSet s) {
  if (UsesAvx2Kernels(s) && Avx2FloatKernels() != nullptr) return *Avx2FloatKernels();
  return ScalarFloatKernels();
}

const FloatKernels& ActiveFloatKernels() {
  static const FloatKernels* const active = &FloatKernelsFor(ActiveKernelSet());
  return *active;
}

}  // namespace quants

float DotF32(const float* a, const float* b, int64_t n) {
  return quants::ActiveFloatKernels().dot_f32(a, b, n);
}

}  // namespace pinfer
