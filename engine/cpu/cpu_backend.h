// The CPU backend: the reference forward pass of a Llama-family decoder (every architecture of
// engine/model/architecture.h) over a batch of
// tokens from many sequences, multiplying against quantized weights directly and reading
// keys and values through the KV cache's block tables.
//
// Memory: every scratch buffer is one CpuWorkspace (engine/cpu/cpu_workspace.h) laid out by
// CpuWorkspaceLayout for the limits ReserveForLimits gives, allocated and committed by
// Commit, the same bytes the memory ledger's workspace line predicts. Commit also faults the
// weights' pages in (and with lock_memory mlock()s them), and MakeKvStorage commits the KV
// pool, asking for transparent huge pages. A step never allocates: one that would need more
// than the workspace holds is refused, naming the line.
#pragma once

#include <memory>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/cpu_workspace.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/model.h"

namespace pinfer {

class CpuBackend : public Backend {
 public:
  // max_tokens: the most tokens one Forward takes (max_num_batched_tokens); n_threads 0 means
  // all hardware threads. The model must outlive the backend. Allocates nothing: the
  // workspace follows ReserveForLimits and Commit.
  CpuBackend(const Model& model, int max_tokens, int n_threads = 0);

  std::string name() const override { return "cpu"; }
  // FailedPrecondition before Commit or for a step of more than max_tokens tokens (naming
  // the workspace line); then ValidateBatch's checks.
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache, float* logits) override;
  // The committed workspace's bytes (0 before Commit).
  uint64_t WorkspaceBytes() const override;
  // Lays the workspace out (may be called again; the next Commit then allocates the new
  // layout). The CPU's scratch does not depend on the limits beyond max_tokens and threads.
  absl::Status ReserveForLimits(int max_num_seqs, int max_model_len, int block_size) override;
  absl::Status Commit(bool lock_memory) override;
  std::string CommitSummary() const override { return commit_summary_; }
  WeightResidency Weights() const override;
  // Host memory with every page written (transparent huge pages asked for; locked after a
  // Commit with lock_memory).
  absl::StatusOr<std::unique_ptr<KvStorage>> MakeKvStorage(size_t block_bytes,
                                                           int64_t num_blocks) override;

  int threads() const { return pool_.size(); }
  // How every MatMul of the forward pass multiplies (default: 8-bit activations for the
  // formats with integer kernels, engine/cpu/matmul.h). Tests that compare another backend
  // with this one at the float path's accuracy set float_activations.
  void set_matmul_options(const MatMulOptions& o) { matmul_ = o; }
  // The layout ReserveForLimits chose (empty before).
  const std::vector<CpuBufferSize>& layout() const { return layout_; }

 private:
  absl::Status CheckStep(const ForwardBatch& batch, const KvCache& cache) const;
  // The steps of Forward, each over the batch's n tokens, on the workspace's buffers.
  void Embed(const ForwardBatch& batch);              // residual = embeddings (ids checked)
  void NormInto(int n, const std::vector<float>& w);  // normed = RMSNorm(residual) w
  // q (biased, normed, rotated, scaled as the model says) and K/V of layer l into the cache.
  absl::Status QkvIntoCache(const ForwardBatch& batch, KvCache& cache, int l);
  void Attention(const ForwardBatch& batch, const KvCache& cache, int layer);  // attention out
  void AddResidual(int n, const std::vector<float>& post_norm);  // residual += [norm] proj
  absl::Status Layer(const ForwardBatch& batch, KvCache& cache, int l);
  float* Buf(CpuBuffer b) const { return ws_->Get(b); }

  const Model& model_;
  int max_tokens_;
  bool lock_memory_ = false;
  ThreadPool pool_;
  MatMulOptions matmul_;
  std::vector<CpuBufferSize> layout_;
  std::unique_ptr<CpuWorkspace> ws_;
  std::vector<Model::WeightRange> weight_ranges_;
  std::string commit_summary_;
};

}  // namespace pinfer
