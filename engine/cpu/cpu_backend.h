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
//
// Threads: every step of a forward pass runs on the backend's ThreadPool: the matmuls by
// weight rows, attention by (token, KV head), and the element-wise work (embedding, norms,
// RoPE and the KV writes, SwiGLU, residual adds, the matmuls' activation quantization) by
// token rows, a single token's on the calling thread. No value depends on the thread count.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/cpu_workspace.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/repack.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/model.h"
#include "loaders/host_memory.h"

namespace pinfer {

class CpuBackend : public Backend {
 public:
  // max_tokens: the most tokens one Forward takes (max_num_batched_tokens); n_threads 0 means
  // all hardware threads. The model must outlive the backend. Allocates nothing: the
  // workspace follows ReserveForLimits and Commit. repack: the first Commit repacks the
  // matrices engine/cpu/repack.h's rule picks for the process's kernel set (false:
  // --no-repack, the file's layout).
  CpuBackend(const Model& model, int max_tokens, int n_threads = 0, bool repack = true);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  // FailedPrecondition before Commit or for a step of more than max_tokens tokens (naming
  // the workspace line); then ValidateBatch's checks.
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache, float* logits) override;
  // The committed workspace's bytes (0 before Commit).
  uint64_t WorkspaceBytes() const override;
  // Lays the workspace out (may be called again; the next Commit then allocates the new
  // layout). The CPU's scratch does not depend on the limits beyond max_tokens and threads.
  absl::Status ReserveForLimits(int max_num_seqs, int max_model_len, int block_size) override;
  // Repacks the weights (once, on the first call: repack_plan()'s matrices into one buffer
  // the backend owns, threaded by whole groups, each matrix's file pages released as soon as
  // it is packed, so resident memory never holds both layouts of more than one matrix), then
  // pages in (or locks) the weights and commits the workspace.
  absl::Status Commit(bool lock_memory) override;
  std::string CommitSummary() const override { return commit_summary_; }
  WeightResidency Weights() const override;
  // Host memory with every page written (transparent huge pages asked for; locked after a
  // Commit with lock_memory).
  absl::StatusOr<std::unique_ptr<KvStorage>> MakeKvStorage(size_t block_bytes,
                                                           int64_t num_blocks) override;

  int threads() const { return pool_.size(); }
  // The matrices this backend repacks (empty with repack = false): what the engine's ledger
  // counts (AccountRepack).
  const RepackPlan& repack_plan() const { return repack_plan_; }
  // "repacked 224 matrices (3.50 GiB) for avx2 in 1.20 s" after Commit; "file layout
  // (--no-repack)", or "file layout (no packed kernels for these formats in <set>)".
  std::string RepackSummary() const;
  // How every MatMul of the forward pass multiplies (default: 8-bit activations for the
  // formats with integer kernels, engine/cpu/matmul.h). Tests that compare another backend
  // with this one at the float path's accuracy set float_activations.
  void set_matmul_options(const MatMulOptions& o) { matmul_ = o; }
  // The layout ReserveForLimits chose (empty before).
  const std::vector<CpuBufferSize>& layout() const { return layout_; }

 private:
  absl::Status CheckStep(const ForwardBatch& batch, const KvCache& cache) const;
  // The steps of Forward, each over the batch's n tokens, on the workspace's buffers. The
  // element-wise steps run as one ParallelFor over the token rows (even static splits; a
  // single token stays on the caller), each row computed by the same *Row function whatever
  // the split or the thread count, so the floats are those of a serial pass.
  //
  // residual = embeddings (ids checked); then, with norm, normed = RMSNorm(residual) norm.
  void EmbedAndNorm(const ForwardBatch& batch, const std::vector<float>* norm);
  // q (biased, normed, rotated, scaled as the model says) and K/V of layer l into the cache,
  // from normed (the layer's attention norm of the residual).
  absl::Status QkvIntoCache(const ForwardBatch& batch, KvCache& cache, int l);
  // QkvIntoCache's work for token t after the matmuls: its q, k, v rows (bias, QK-norm, RoPE,
  // query scale) and its K and V rows encoded into the cache slot of (seq_ids[t],
  // positions[t]). Tokens of one step name distinct slots, so threads write disjoint rows.
  void QkvRow(const ForwardBatch& batch, KvCache& cache, int l, int t, KvDtype kv_dtype);
  void Attention(const ForwardBatch& batch, const KvCache& cache, int layer);  // attention out
  // residual += [RMSNorm(proj) post_norm] proj for token t.
  void AddResidualRow(int t, const std::vector<float>& post_norm);
  // normed = RMSNorm(residual) w for token t.
  void NormRow(int t, const std::vector<float>& w);
  // AddResidualRow for every token, then (with norm) NormRow of the new residual, in one pass.
  void AddResidualAndNorm(int n, const std::vector<float>& post_norm,
                          const std::vector<float>* norm);
  // Layer l from normed (its attention norm of the residual) to the residual after its FFN,
  // and normed = the next layer's attention norm of that residual (none after the last).
  absl::Status Layer(const ForwardBatch& batch, KvCache& cache, int l);
  float* Buf(CpuBuffer b) const { return ws_->Get(b); }
  // Repacks repack_plan_'s matrices (Commit's first step).
  absl::Status Repack(bool lock_memory);
  // The matrix as MatMul takes it: the backend's packed copy when m was repacked, else m.
  const WeightMatrix& Mat(const WeightMatrix& m) const;
  // The weights' ranges now: the model's, less the repacked matrices, and the packed buffer.
  std::vector<Model::WeightRange> RangesNow() const;

  const Model& model_;
  int max_tokens_;
  bool lock_memory_ = false;
  ThreadPool pool_;
  MatMulOptions matmul_;
  std::vector<CpuBufferSize> layout_;
  std::unique_ptr<CpuWorkspace> ws_;
  std::vector<Model::WeightRange> weight_ranges_;
  std::string commit_summary_;
  bool repack_ = true;
  RepackPlan repack_plan_;
  // The repacked matrices' bytes (owned here), and copies of those matrices with `packed` set
  // into it, by the address of the Model's matrix.
  std::unique_ptr<CommittedMemory> packed_memory_;
  std::unordered_map<const WeightMatrix*, WeightMatrix> packed_;
  std::string repack_summary_;
};

}  // namespace pinfer
