// The CUDA backend: the Llama forward pass of engine/cpu/cpu_backend.cc on one GPU. Weights
// are uploaded once, in their storage types, into one device allocation; the KV pool is device
// memory with the host layout (DeviceKvPool, shared with the KvCache that accounts for it); the
// workspace is sized for max_tokens tokens; a step's metadata (tokens, positions, slots, block
// tables) goes up in two copies from pinned staging buffers.
//
// CUDA graphs: CaptureGraphs records the whole forward pass for steps of 1, 2, 4, 8, 16, 32,
// ... tokens (up to max_num_seqs) in which every token wants logits (decode steps). Kernels
// read the step's metadata from fixed device buffers, so a replay only needs those buffers
// refilled: a step of n tokens runs the graph of the smallest size N >= n, its N - n padding
// rows being token 0 at position 0 with no KV slot (their K/V writes are skipped, their
// logits dropped). Rows never mix in any kernel, so padding does not change the real rows'
// results (bit-identical to eager up to 16 tokens, where the GEMV serves every size).
//
// PINFER_CUDA_SYNC=1 in the environment synchronises after every launch (eager steps only)
// and names the kernel and layer that failed.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cuda/device_kv_pool.h"
#include "cuda/device_matmul.h"
#include "cuda/kernels.h"
#include "engine/backend.h"
#include "engine/model/model.h"

namespace pinfer::cuda {

class CudaBackend final : public Backend {
 public:
  // Fails (Unavailable, "no CUDA device: ...") without a device; the model must outlive the
  // backend. A KvCache holding this backend's storage shares its pool, so either may go first.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const Model& model, int max_tokens,
                                                             int device = 0);
  ~CudaBackend() override;

  std::string name() const override { return name_; }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache, float* logits) override;
  uint64_t WorkspaceBytes() const override {
    return workspace_bytes_ + tables_capacity_ * sizeof(int32_t) +
           logit_rows_ * static_cast<uint64_t>(model_.config().n_vocab) * sizeof(float);
  }
  absl::Status ReserveForLimits(int max_num_seqs, int max_model_len, int block_size) override;
  uint64_t DetectedMemory() const override { return detected_; }
  uint64_t MeasuredReserve() const override { return reserve_; }
  absl::StatusOr<std::unique_ptr<KvStorage>> MakeKvStorage(size_t block_bytes,
                                                           int64_t num_blocks) override;
  uint64_t GraphReserveBytes(int max_num_seqs) const override;
  absl::Status CaptureGraphs(KvCache& cache, int max_num_seqs) override;
  uint64_t GraphBytes() const override { return graph_bytes_; }

  uint64_t weight_bytes() const { return weight_bytes_; }
  cudaStream_t stream() const { return stream_; }
  // The padded step sizes with a captured graph (ascending), and how many steps replayed one.
  std::vector<int> graph_sizes() const;
  int64_t graph_replays() const { return graph_replays_; }
  // The padded sizes CaptureGraphs captures for max_num_seqs (and max_tokens) tokens.
  static std::vector<int> GraphSizesFor(int max_num_seqs, int max_tokens);

 private:
  struct Layer {
    const float *attn_norm = nullptr, *ffn_norm = nullptr;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr;
    const float *q_norm = nullptr, *k_norm = nullptr;  // [head_dim] (qk_norm), else nullptr
    DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  };
  struct Graph {
    int size = 0;
    cudaGraphExec_t exec = nullptr;
  };
  CudaBackend(const Model& model, int max_tokens) : model_(model), max_tokens_(max_tokens) {}
  absl::Status Init(int device);
  absl::Status UploadWeights();  // cuda_weights.cc
  absl::Status AllocateWorkspace();
  // Fills the staging buffers for the step (rows [n, padded) are padding) and copies them up;
  // the batch has passed ValidateBatch.
  absl::Status UploadStep(const ForwardBatch& batch, const KvCache& cache, int padded);
  absl::Status UploadMeta(size_t table_entries);
  absl::Status ReserveTables(size_t entries);
  // Device logits for `rows` rows (max_tokens until ReserveForLimits knows max_num_seqs;
  // reallocating drops the graphs).
  absl::Status ReserveLogits(size_t rows);
  // Every launch of a step of n tokens, n_out of them wanting logits, on stream_ only: no
  // allocation, no synchronisation, no host access (so it can be captured).
  absl::Status Enqueue(int n, int n_out, const KvLayerView& kv);
  // After launch `what` (layer < 0: outside the layers): the launch's error, or with
  // PINFER_CUDA_SYNC=1 (and not capturing) the kernel's own, with file, line and place.
  absl::Status Checked(cudaError_t err, const char* what, int layer, int line) const;
  absl::Status Checked(const absl::Status& s, const char* what, int layer, int line) const;
  // Whether cache's geometry is that of the pool of the latest MakeKvStorage (the cache
  // cannot say whose storage it holds; a mismatch is a caller's error).
  bool HoldsPoolOf(const KvCache& cache) const;
  KvLayerView ViewOf(const KvCache& cache) const;
  const Graph* GraphFor(const ForwardBatch& batch, const KvCache& cache) const;
  // CUDA graphs (cuda_graphs.cc).
  void DropGraphs();
  absl::Status CaptureGraph(int size, const KvLayerView& kv);

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
  const float* rope_freq_factors_ = nullptr;  // [head_dim / 2], or nullptr: no factors
  const float* rope_freqs_ = nullptr;         // [head_dim / 2]: RopeFrequencies
  std::vector<Layer> layers_;

  uint8_t* workspace_ = nullptr;  // one allocation, carved below
  float *x_ = nullptr, *xb_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr;
  float *att_ = nullptr, *gate_ = nullptr, *up_ = nullptr;
  float* logits_ = nullptr;  // [logit_rows_ x n_vocab], its own allocation
  size_t logit_rows_ = 0;
  // The step's metadata: one region [slot offsets (int64) | tokens | positions | table
  // starts | logit rows], max_tokens_ entries each, on the device (in the workspace) and in
  // pinned host memory; block tables in their own pair of buffers, grown on demand (which
  // drops the graphs, whose kernels hold the old address).
  size_t meta_bytes_ = 0;
  uint8_t* d_meta_ = nullptr;
  uint8_t* h_meta_ = nullptr;
  int32_t *d_tokens_ = nullptr, *d_positions_ = nullptr, *d_table_start_ = nullptr;
  int32_t* d_logit_rows_ = nullptr;
  int64_t* d_slot_offset_ = nullptr;
  int32_t *h_tokens_ = nullptr, *h_positions_ = nullptr, *h_table_start_ = nullptr;
  int32_t* h_logit_rows_ = nullptr;
  int64_t* h_slot_offset_ = nullptr;
  int32_t* d_tables_ = nullptr;
  int32_t* h_tables_ = nullptr;
  size_t tables_capacity_ = 0;
  std::vector<std::pair<SeqId, int32_t>> table_of_;  // the step's sequences and table starts
  // Split attention (decode-sized steps): at most attn_splits_ splits per (token, head), whose
  // partial results live in the workspace, whatever the context length.
  float* d_attn_scratch_ = nullptr;
  int attn_splits_ = 1;

  bool debug_sync_ = false;       // PINFER_CUDA_SYNC=1
  bool permuted_inputs_ = false;  // some matrix has an act-order permutation
  bool capturing_ = false;
  std::vector<Graph> graphs_;  // ascending sizes
  KvLayerView graph_kv_;       // the KV geometry the graphs were captured with
  uint64_t graph_bytes_ = 0;
  int64_t graph_replays_ = 0;

  // The pool of the latest MakeKvStorage, shared with the KvCache that stores into it.
  std::shared_ptr<DeviceKvPool> kv_pool_;
};

}  // namespace pinfer::cuda
