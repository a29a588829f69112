// The scalar set's batched dot products (DotF32 takes the values in order, so the dot layout
// is the identity), and the dispatch of the batch entry points of quants.h to the active set
// (the avx2 set's are in quants_dot_batch_avx2.cc).
#include <cstring>

#include "loaders/quants_internal.h"

namespace pinfer {
namespace quants::scalar {

void ToDotLayout(const float* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void DequantizeRowDotLayout(GgmlType t, const void* row, float* dst, int64_t n) {
  DequantizeRowScalar(t, row, dst, n);
}

void DotF32Tile(const float* a, int64_t a_stride, int na, const float* b, int64_t b_stride, int nb,
                int64_t n, float* out, int64_t out_stride) {
  for (int j = 0; j < nb; ++j) {
    for (int i = 0; i < na; ++i)
      out[j * out_stride + i] = scalar::DotF32(a + i * a_stride, b + j * b_stride, n);
  }
}

}  // namespace quants::scalar

void ToDotLayout(const float* src, float* dst, int64_t n) {
  quants::ActiveFloatKernels().to_dot_layout(src, dst, n);
}

void DequantizeRowDotLayout(GgmlType t, const void* row, float* dst, int64_t n) {
  quants::ActiveFloatKernels().dequantize_row_dot_layout(t, row, dst, n);
}

void DotF32Tile(const float* a, int64_t a_stride, int na, const float* b, int64_t b_stride, int nb,
                int64_t n, float* out, int64_t out_stride) {
  quants::ActiveFloatKernels().dot_f32_tile(a, a_stride, na, b, b_stride, nb, n, out, out_stride);
}

}  // namespace pinfer
