// The cuBLAS subset pagedinfer calls, for the host emulator: handles, streams, workspaces and
// cublasGemmEx with float32 output and float32 compute, as a plain float32 reference GEMM
// (not cuBLAS's numerics). The GEMM is an operation on the handle's stream, so it is
// recorded by a capture like a kernel.
#pragma once

#include "tests/cuda_emu/emu_runtime.h"

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_NOT_SUPPORTED = 15
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

struct EmuCublas;
typedef EmuCublas* cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t s);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* s);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes);
const char* cublasGetStatusName(cublasStatus_t st);
const char* cublasGetStatusString(cublasStatus_t st);
// C = alpha op(A) op(B) + beta C, column-major; alpha and beta are host floats.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType_t a_type, int lda, const void* B,
                            cudaDataType_t b_type, int ldb, const void* beta, void* C,
                            cudaDataType_t c_type, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);
