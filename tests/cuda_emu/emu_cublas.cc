#include "tests/cuda_emu/emu_cublas.h"

#include <algorithm>

struct EmuCublas {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

namespace {

float Load(cudaDataType_t t, const void* p, int64_t i) {
  switch (t) {
    case CUDA_R_32F:
      return static_cast<const float*>(p)[i];
    case CUDA_R_16F:
      return pinfer::Fp16ToFp32(static_cast<const uint16_t*>(p)[i]);
    case CUDA_R_16BF:
      return pinfer::Bf16ToFp32(static_cast<const uint16_t*>(p)[i]);
  }
  return 0.0f;
}

size_t ElementBytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new EmuCublas();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t s) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = s;
  handle->workspace = nullptr;  // as cuBLAS: a new stream goes back to the default workspace
  handle->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* s) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *s = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (workspace != nullptr && !emu::IsDeviceRange(workspace, bytes)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t st) {
  switch (st) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t st) { return cublasGetStatusName(st); }

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType_t a_type, int lda, const void* B,
                            cudaDataType_t b_type, int ldb, const void* beta, void* C,
                            cudaDataType_t c_type, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (c_type != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F || a_type != b_type) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (m < 0 || n < 0 || k < 0 || ldc < std::max(1, m) ||
      lda < std::max(1, transa == CUBLAS_OP_N ? m : k) ||
      ldb < std::max(1, transb == CUBLAS_OP_N ? k : n)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  // Every operand lies in device memory, up to its last element.
  const int64_t a_cols = transa == CUBLAS_OP_N ? k : m, b_cols = transb == CUBLAS_OP_N ? n : k;
  const int64_t a_rows = transa == CUBLAS_OP_N ? m : k, b_rows = transb == CUBLAS_OP_N ? k : n;
  auto span = [](int64_t rows, int64_t cols, int64_t ld, size_t el) {
    return static_cast<size_t>((cols - 1) * ld + rows) * el;
  };
  if ((k > 0 && (!emu::IsDeviceRange(A, span(a_rows, a_cols, lda, ElementBytes(a_type))) ||
                 !emu::IsDeviceRange(B, span(b_rows, b_cols, ldb, ElementBytes(b_type))))) ||
      !emu::IsDeviceRange(C, span(m, n, ldc, 4))) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  const cudaError_t err = emu::Submit(handle->stream, "cublasGemmEx", [=]() {
    float* c = static_cast<float*>(C);
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        float sum = 0.0f;
        for (int l = 0; l < k; ++l) {
          const int64_t ai = transa == CUBLAS_OP_N ? i + static_cast<int64_t>(l) * lda
                                                   : l + static_cast<int64_t>(i) * lda;
          const int64_t bi = transb == CUBLAS_OP_N ? l + static_cast<int64_t>(j) * ldb
                                                   : j + static_cast<int64_t>(l) * ldb;
          sum += Load(a_type, A, ai) * Load(b_type, B, bi);
        }
        float& out = c[i + static_cast<int64_t>(j) * ldc];
        out = be == 0.0f ? al * sum : al * sum + be * out;  // beta 0: C is not read
      }
    }
  });
  return err == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
