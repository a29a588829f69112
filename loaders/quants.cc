// Type dispatch for row dequantization, quantization and dot products, and the plain float
// formats (F32, F16, BF16).
#include "loaders/quants.h"

#include <algorithm>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

namespace pinfer {
namespace {

template <typename Block>
const Block* As(const void* p) {
  return static_cast<const Block*>(p);
}
template <typename Block>
Block* AsMut(void* p) {
  return static_cast<Block*>(p);
}

}  // namespace

void DequantizeRow(GgmlType t, const void* src, float* dst, int64_t n) {
  if (quants::ActiveFloatKernels().dequantize_fast(t, src, dst, n)) return;
  quants::DequantizeRowScalar(t, src, dst, n);
}

void quants::DequantizeRowScalar(GgmlType t, const void* src, float* dst, int64_t n) {
  using namespace quants;
  switch (t) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(h[i]);
      return;
    }
    case GgmlType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(h[i]);
      return;
    }
    case GgmlType::kQ4_0:
      return DequantQ4_0(As<BlockQ4_0>(src), dst, n / kQK4_0);
    case GgmlType::kQ4_1:
      return DequantQ4_1(As<BlockQ4_1>(src), dst, n / kQK4_1);
    case GgmlType::kQ5_0:
      return DequantQ5_0(As<BlockQ5_0>(src), dst, n / kQK5_0);
    case GgmlType::kQ5_1:
      return DequantQ5_1(As<BlockQ5_1>(src), dst, n / kQK5_1);
    case GgmlType::kQ8_0:
      return DequantQ8_0(As<BlockQ8_0>(src), dst, n / kQK8_0);
    case GgmlType::kQ4_K:
      return DequantQ4_K(As<BlockQ4_K>(src), dst, n / kQK_K);
    case GgmlType::kQ5_K:
      return DequantQ5_K(As<BlockQ5_K>(src), dst, n / kQK_K);
    case GgmlType::kQ6_K:
      return DequantQ6_K(As<BlockQ6_K>(src), dst, n / kQK_K);
    default:  // unsupported storage type: documented to produce zeros
      std::fill(dst, dst + n, 0.0f);
      return;
  }
}

void QuantizeRow(GgmlType t, const float* src, void* dst, int64_t n) {
  using namespace quants;
  switch (t) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToFp16(src[i]);
      return;
    }
    case GgmlType::kBF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToBf16(src[i]);
      return;
    }
    case GgmlType::kQ4_0:
      return QuantQ4_0(src, AsMut<BlockQ4_0>(dst), n / kQK4_0);
    case GgmlType::kQ4_1:
      return QuantQ4_1(src, AsMut<BlockQ4_1>(dst), n / kQK4_1);
    case GgmlType::kQ5_0:
      return QuantQ5_0(src, AsMut<BlockQ5_0>(dst), n / kQK5_0);
    case GgmlType::kQ5_1:
      return QuantQ5_1(src, AsMut<BlockQ5_1>(dst), n / kQK5_1);
    case GgmlType::kQ8_0:
      return QuantQ8_0(src, AsMut<BlockQ8_0>(dst), n / kQK8_0);
    case GgmlType::kQ4_K:
      return QuantQ4_K(src, AsMut<BlockQ4_K>(dst), n / kQK_K);
    case GgmlType::kQ5_K:
      return QuantQ5_K(src, AsMut<BlockQ5_K>(dst), n / kQK_K);
    case GgmlType::kQ6_K:
      return QuantQ6_K(src, AsMut<BlockQ6_K>(dst), n / kQK_K);
    default:  // unsupported storage type: documented to write nothing
      return;
  }
}

float DotRow(GgmlType t, const void* row, const float* x, int64_t n) {
  const quants::FloatKernels& k = quants::ActiveFloatKernels();
  switch (t) {
    case GgmlType::kF32:
      return k.dot_f32(static_cast<const float*>(row), x, n);
    case GgmlType::kF16:
      return k.dot_f16(static_cast<const uint16_t*>(row), x, n);
    case GgmlType::kBF16:
      return k.dot_bf16(static_cast<const uint16_t*>(row), x, n);
    default:  // block formats; an unsupported storage type is documented to give 0
      return k.dot_blocks(t, row, x, n);
  }
}

}  // namespace pinfer
