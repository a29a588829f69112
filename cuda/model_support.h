// Which models the CUDA backend's kernels run: the llama block with qwen2's biases and
// qwen3's per-head Q/K norms. Models with other features are refused at start.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "engine/model/model_config.h"
#include "kvcache/kv_cache.h"

namespace pinfer {

// The model's features the CUDA kernels do not compute yet, named and comma-separated ("" when
// they run it all): post-norms, scaled embeddings, GeGLU, soft-capping, a query scale other
// than 1 / sqrt(head_dim) (that one is the kernels' own attention scale), partial rotary,
// sliding windows, per-layer RoPE bases.
std::string UnsupportedOnCuda(const ModelConfig& c);

// The KV caches the kernels address: one block table per sequence whose blocks hold every
// layer. FailedPrecondition for a cache with sliding-window layer groups (several tables).
absl::Status CheckCudaKvCache(const KvCache& cache);

}  // namespace pinfer
