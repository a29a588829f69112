// The CPU backend: the reference forward pass of a Llama-family decoder (every architecture of
// engine/model/architecture.h) over a batch of
// tokens from many sequences, multiplying against quantized weights directly and reading
// keys and values through the KV cache's block tables.
#pragma once

#include <memory>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/model.h"

namespace pinfer {

class CpuBackend : public Backend {
 public:
  // max_tokens: the most tokens one Forward takes (max_num_batched_tokens); n_threads 0 means
  // all hardware threads. The model must outlive the backend.
  CpuBackend(const Model& model, int max_tokens, int n_threads = 0);

  std::string name() const override { return "cpu"; }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache, float* logits) override;
  uint64_t WorkspaceBytes() const override;
  int threads() const { return pool_.size(); }

  // Floats of activation workspace for a step of max_tokens tokens (the ledger's formula).
  static uint64_t WorkspaceFloats(const ModelConfig& c, int max_tokens);

 private:
  // The steps of Forward, each over the batch's n tokens.
  void Embed(const ForwardBatch& batch);  // x_ = embeddings (ids checked by ValidateBatch)
  void NormInto(int n, const std::vector<float>& w);  // xb_ = RMSNorm(x_) w
  // q_ (biased, normed, rotated, scaled as the model says) and K/V of layer l into the cache.
  void QkvIntoCache(const ForwardBatch& batch, KvCache& cache, int l);
  void Attention(const ForwardBatch& batch, const KvCache& cache, int layer);  // att_
  void AddResidual(int n, const std::vector<float>& post_norm);                // x_ += [norm] proj_

  const Model& model_;
  int max_tokens_;
  ThreadPool pool_;
  // Activations, row-major per token.
  std::vector<float> x_;                     // [max_tokens x dim] residual stream
  std::vector<float> xb_;                    // [max_tokens x dim] normed input
  std::vector<float> q_;                     // [max_tokens x q_dim]
  std::vector<float> k_, v_;                 // [max_tokens x kv_dim]
  std::vector<float> att_;                   // [max_tokens x q_dim] attention output
  std::vector<float> proj_;                  // [max_tokens x dim] attention / FFN projection out
  std::vector<float> gate_, up_;             // [max_tokens x n_ff]
  std::vector<std::vector<float>> scratch_;  // per thread: attention's scratch
};

}  // namespace pinfer
