#include "cuda/device_matmul.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_check.h"

namespace pinfer::cuda {

absl::StatusOr<std::unique_ptr<DeviceMatMul>> DeviceMatMul::Create(cublasHandle_t handle,
                                                                   int max_tokens, int64_t max_cols,
                                                                   bool permuted_inputs,
                                                                   void* cublas_workspace,
                                                                   size_t cublas_workspace_bytes) {
  std::unique_ptr<DeviceMatMul> m(new DeviceMatMul());
  m->handle_ = handle;
  m->cublas_workspace_ = cublas_workspace;
  m->cublas_workspace_bytes_ = cublas_workspace_bytes;
  m->max_tokens_ = max_tokens;
  m->max_cols_ = max_cols;
  m->x_bytes_ = 2ull * static_cast<uint64_t>(std::max(max_tokens, 1)) *
                static_cast<uint64_t>(std::max<int64_t>(max_cols, 1));
  m->tile_bytes_ = std::max<uint64_t>(kWeightTileBytes, 2ull * static_cast<uint64_t>(max_cols));
  PINFER_CUDA_RETURN_IF_ERROR(cudaMalloc(&m->x16_, m->x_bytes_));
  PINFER_CUDA_RETURN_IF_ERROR(cudaMalloc(&m->tile_, m->tile_bytes_));
  if (permuted_inputs) {
    m->xperm_bytes_ = m->x_bytes_ * 2;  // floats
    PINFER_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&m->xperm_), m->xperm_bytes_));
  }
  return m;
}

DeviceMatMul::~DeviceMatMul() {
  cudaFree(x16_);
  cudaFree(tile_);
  cudaFree(xperm_);
}

absl::Status DeviceMatMul::RunMany(const DeviceMatrix* const* ws, float* const* ys, int count,
                                   const float* x, int n, cudaStream_t s) {
  if (n <= 0) return absl::OkStatus();
  bool permuted = false;
  for (int i = 0; i < count; ++i) permuted = permuted || ws[i]->perm != nullptr;
  if (n <= kMaxGemvTokens && count > 1 && !permuted) {
    const cudaError_t err = LaunchGemvMulti(ws, ys, count, x, n, s);
    if (err != cudaErrorNotSupported) {
      PINFER_CUDA_RETURN_IF_ERROR(err);
      return absl::OkStatus();
    }
  }
  for (int i = 0; i < count; ++i) PINFER_RETURN_IF_ERROR(Run(*ws[i], x, n, ys[i], s));
  return absl::OkStatus();
}

absl::Status DeviceMatMul::RunSwiGlu(const DeviceMatrix& gate, const DeviceMatrix& up,
                                     const float* x, int n, float* y, float* up_scratch,
                                     cudaStream_t s) {
  if (n <= 0) return absl::OkStatus();
  if (n <= kMaxGemvTokens && gate.perm == nullptr && up.perm == nullptr) {
    const cudaError_t err = LaunchGemvSwiGlu(gate, up, x, n, y, s);
    if (err != cudaErrorNotSupported) {
      PINFER_CUDA_RETURN_IF_ERROR(err);
      return absl::OkStatus();
    }
  }
  PINFER_RETURN_IF_ERROR(Run(gate, x, n, y, s));
  PINFER_RETURN_IF_ERROR(Run(up, x, n, up_scratch, s));
  PINFER_CUDA_RETURN_IF_ERROR(LaunchSwiGlu(y, up_scratch, static_cast<int64_t>(n) * gate.rows, s));
  return absl::OkStatus();
}

absl::Status DeviceMatMul::Run(const DeviceMatrix& w, const float* x, int n, float* y,
                               cudaStream_t s, bool accumulate) {
  if (n <= 0 || w.rows == 0) return absl::OkStatus();
  if (!WeightTypeSupported(w.type)) {
    return absl::UnimplementedError(absl::StrCat("no CUDA kernel for weight type id ", w.type));
  }
  if (w.perm != nullptr) {
    if (xperm_ == nullptr || n > max_tokens_ || w.cols > max_cols_) {
      return absl::FailedPreconditionError(
          "an act-order matrix needs a DeviceMatMul created with permuted_inputs, sized for it");
    }
    PINFER_CUDA_RETURN_IF_ERROR(LaunchGatherColumns(x, w.perm, n, w.cols, xperm_, s));
    x = xperm_;
  }
  if (n <= kMaxGemvTokens) {
    PINFER_CUDA_RETURN_IF_ERROR(LaunchGemv(w, x, n, y, w.rows, s, accumulate));
    return absl::OkStatus();
  }
  if (n > max_tokens_ || w.cols > max_cols_) {
    return absl::InvalidArgumentError(absl::StrCat("a ", n, " x ", w.cols, " input exceeds the ",
                                                   max_tokens_, " x ", max_cols_,
                                                   " this multiplier was sized for"));
  }
  // Only on a change of stream (so a capture on the handle's stream makes no such call):
  // cublasSetStream resets the workspace to cuBLAS's default pool, which a CUDA graph capture
  // must not use (it may allocate), so the backend's own goes back right after.
  cudaStream_t current = nullptr;
  PINFER_CUBLAS_RETURN_IF_ERROR(cublasGetStream(handle_, &current));
  if (current != s) {
    PINFER_CUBLAS_RETURN_IF_ERROR(cublasSetStream(handle_, s));
    if (cublas_workspace_ != nullptr) {
      PINFER_CUBLAS_RETURN_IF_ERROR(
          cublasSetWorkspace(handle_, cublas_workspace_, cublas_workspace_bytes_));
    }
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const int k = static_cast<int>(w.cols);
  // Row-major Y[n x rows] is column-major Y^T = W X^T: A = W (row-major = column-major W^T,
  // transposed), B = X^T (row-major X = column-major X^T).
  if (w.type == kWF32) {
    PINFER_CUBLAS_RETURN_IF_ERROR(
        cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows), n, k, &alpha,
                     w.data, CUDA_R_32F, k, x, CUDA_R_32F, k, &beta, y, CUDA_R_32F,
                     static_cast<int>(w.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return absl::OkStatus();
  }
  const bool bf16 = w.type == kWBF16;
  const cudaDataType_t dt = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  PINFER_CUDA_RETURN_IF_ERROR(LaunchToHalf(x, static_cast<int64_t>(n) * k, x16_, bf16, s));
  if (w.type == kWF16 || bf16) {
    PINFER_CUBLAS_RETURN_IF_ERROR(
        cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows), n, k, &alpha,
                     w.data, dt, k, x16_, dt, k, &beta, y, CUDA_R_32F, static_cast<int>(w.rows),
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return absl::OkStatus();
  }
  // Whole multiples of 128 rows when a tile holds more, so that every tile's output y + r0
  // stays 512-byte aligned (cuBLAS picks its faster kernels for aligned operands).
  int64_t tile_rows = std::max<int64_t>(1, static_cast<int64_t>(tile_bytes_ / (2ull * k)));
  if (tile_rows > 128) tile_rows -= tile_rows % 128;
  for (int64_t r0 = 0; r0 < w.rows; r0 += tile_rows) {
    const int64_t rows = std::min(tile_rows, w.rows - r0);
    PINFER_CUDA_RETURN_IF_ERROR(LaunchDequantRows(w, r0, rows, tile_, false, s));
    PINFER_CUBLAS_RETURN_IF_ERROR(
        cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), n, k, &alpha, tile_,
                     CUDA_R_16F, k, x16_, CUDA_R_16F, k, &beta, y + r0, CUDA_R_32F,
                     static_cast<int>(w.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  return absl::OkStatus();
}

}  // namespace pinfer::cuda
