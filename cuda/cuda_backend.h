// The CUDA backend: the Llama forward pass of engine/cpu_backend.cc on one GPU. Weights are
// uploaded once, in their storage types, into one device allocation; the KV pool is device
// memory with the host layout (DeviceKvStorage), so KvCache keeps doing the accounting; the
// workspace is sized for max_tokens tokens; block tables and positions go up every step.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cuda/device_kv_storage.h"
#include "cuda/device_matmul.h"
#include "cuda/kernels.h"
#include "engine/backend.h"
#include "engine/model.h"

namespace pinfer::cuda {

class CudaBackend final : public Backend {
 public:
  // Fails (Unavailable, "no CUDA device: ...") without a device; the model must outlive the
  // backend, and a KvCache using this backend's storage must be destroyed before it.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const Model& model, int max_tokens,
                                                             int device = 0);
  ~CudaBackend() override;

  std::string name() const override { return name_; }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache, float* logits) override;
  uint64_t WorkspaceBytes() const override { return workspace_bytes_; }
  uint64_t DetectedMemory() const override { return detected_; }
  uint64_t MeasuredReserve() const override { return reserve_; }
  absl::StatusOr<std::unique_ptr<KvStorage>> MakeKvStorage(size_t block_bytes,
                                                           int64_t num_blocks) override;

  uint64_t weight_bytes() const { return weight_bytes_; }
  cudaStream_t stream() const { return stream_; }

 private:
  struct Layer {
    const float *attn_norm = nullptr, *ffn_norm = nullptr;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr;
    DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  };
  CudaBackend(const Model& model, int max_tokens) : model_(model), max_tokens_(max_tokens) {}
  absl::Status Init(int device);
  absl::Status UploadWeights();
  absl::Status AllocateWorkspace();
  absl::Status UploadStep(const ForwardBatch& batch, const KvCache& cache);
  absl::Status Run(const ForwardBatch& batch, KvCache& cache, float* logits);

  const Model& model_;
  int max_tokens_;
  std::string name_ = "cuda";
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  std::unique_ptr<DeviceMatMul> matmul_;
  uint64_t detected_ = 0, reserve_ = 0, weight_bytes_ = 0, workspace_bytes_ = 0;

  uint8_t* weights_ = nullptr;  // one allocation: every matrix and norm vector
  DeviceMatrix tok_embd_, output_;
  const float* output_norm_ = nullptr;
  std::vector<Layer> layers_;

  uint8_t* workspace_ = nullptr;  // one allocation, carved below
  float *x_ = nullptr, *xb_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr;
  float *att_ = nullptr, *proj_ = nullptr, *gate_ = nullptr, *up_ = nullptr, *logits_ = nullptr;
  int32_t *d_tokens_ = nullptr, *d_positions_ = nullptr, *d_table_start_ = nullptr;
  int32_t* d_logit_rows_ = nullptr;
  int64_t* d_slot_offset_ = nullptr;
  int32_t* d_tables_ = nullptr;  // grown on demand
  size_t tables_capacity_ = 0;
  // Host staging for the step's metadata.
  std::vector<int64_t> h_slot_offset_;
  std::vector<int32_t> h_tables_, h_table_start_;

  DeviceKvStorage* kv_storage_ = nullptr;  // the pool MakeKvStorage handed out (not owned)
};

}  // namespace pinfer::cuda
