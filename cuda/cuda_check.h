// Checked CUDA and cuBLAS calls: every failure becomes an absl::Status naming the call, the
// file and line, the driver's message and a hint. Kernel launches are checked right after
// the launch (cudaGetLastError), so a bad configuration is reported where it happened.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace pinfer::cuda {

absl::Status CudaError(cudaError_t err, const char* expr, const char* file, int line);
absl::Status CublasError(cublasStatus_t st, const char* expr, const char* file, int line);

// "no CUDA device: <cudaGetErrorString>" when none is usable, else OK.
absl::Status DeviceAvailable();

}  // namespace pinfer::cuda

// Evaluates a cudaError_t expression; returns the error status from the enclosing function.
#define PINFER_CUDA_RETURN_IF_ERROR(expr)                                       \
  do {                                                                          \
    const cudaError_t pinfer_err_ = (expr);                                     \
    if (pinfer_err_ != cudaSuccess) {                                           \
      return ::pinfer::cuda::CudaError(pinfer_err_, #expr, __FILE__, __LINE__); \
    }                                                                           \
  } while (0)

#define PINFER_CUBLAS_RETURN_IF_ERROR(expr)                                      \
  do {                                                                           \
    const cublasStatus_t pinfer_st_ = (expr);                                    \
    if (pinfer_st_ != CUBLAS_STATUS_SUCCESS) {                                   \
      return ::pinfer::cuda::CublasError(pinfer_st_, #expr, __FILE__, __LINE__); \
    }                                                                            \
  } while (0)

// After a <<<...>>> launch: the launch's own error (bad grid, no kernel image for this GPU).
#define PINFER_CUDA_CHECK_LAUNCH(name) PINFER_CUDA_RETURN_IF_ERROR(cudaGetLastError())

#define PINFER_RETURN_IF_ERROR(expr)         \
  do {                                       \
    const ::absl::Status pinfer_s_ = (expr); \
    if (!pinfer_s_.ok()) return pinfer_s_;   \
  } while (0)
