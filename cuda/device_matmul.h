// Y = X W^T on the device against a weight matrix in its storage type: the GEMV kernel for
// up to kMaxGemvTokens tokens, cuBLAS above that (half/bfloat16 inputs, float32 compute and
// output; block types are dequantized a tile of rows at a time into a bounded half scratch).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda/kernels.h"

namespace pinfer::cuda {

// Bytes of the half scratch that holds a dequantized tile of weight rows.
constexpr uint64_t kWeightTileBytes = 32ull << 20;

class DeviceMatMul {
 public:
  // max_tokens x max_cols: the largest X it multiplies. The handle is borrowed.
  // permuted_inputs: some matrix has an act-order permutation (a float scratch for x').
  // cublas_workspace (borrowed, cublas_workspace_bytes): the handle's workspace, set again
  // after every cublasSetStream (which resets it to cuBLAS's own pool, unusable in a CUDA
  // graph capture); nullptr: cuBLAS's default pool (eager use only).
  static absl::StatusOr<std::unique_ptr<DeviceMatMul>> Create(cublasHandle_t handle, int max_tokens,
                                                              int64_t max_cols,
                                                              bool permuted_inputs = false,
                                                              void* cublas_workspace = nullptr,
                                                              size_t cublas_workspace_bytes = 0);
  ~DeviceMatMul();
  // x: [n x w.cols] floats, y: [n x w.rows] floats, device memory, on stream s;
  // accumulate: y += X W^T (a residual).
  absl::Status Run(const DeviceMatrix& w, const float* x, int n, float* y, cudaStream_t s,
                   bool accumulate = false);
  // ys[i] = X W_i^T for count (<= 3) matrices over the same x: one launch when the GEMV can
  // take them together, else one multiplication each.
  absl::Status RunMany(const DeviceMatrix* const* ws, float* const* ys, int count, const float* x,
                       int n, cudaStream_t s);
  // y = silu(X G^T) * (X U^T) element-wise ([n x gate.rows]); `up_scratch` ([n x up.rows])
  // holds X U^T when the two cannot be fused into one GEMV launch.
  absl::Status RunSwiGlu(const DeviceMatrix& gate, const DeviceMatrix& up, const float* x, int n,
                         float* y, float* up_scratch, cudaStream_t s);
  uint64_t scratch_bytes() const { return x_bytes_ + tile_bytes_ + xperm_bytes_; }

 private:
  DeviceMatMul() = default;
  cublasHandle_t handle_ = nullptr;
  void* cublas_workspace_ = nullptr;
  size_t cublas_workspace_bytes_ = 0;
  int max_tokens_ = 0;
  int64_t max_cols_ = 0;
  void* x16_ = nullptr;     // X as half or bfloat16
  void* tile_ = nullptr;    // dequantized weight rows, half
  float* xperm_ = nullptr;  // x with its columns permuted (act-order matrices only)
  uint64_t x_bytes_ = 0, tile_bytes_ = 0, xperm_bytes_ = 0;
};

}  // namespace pinfer::cuda
