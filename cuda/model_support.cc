#include "cuda/model_support.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pinfer {

std::string UnsupportedOnCuda(const ModelConfig& c) {
  std::vector<std::string> f;
  if (c.post_norms) f.push_back("post-attention and post-FFN norms");
  if (c.scale_embeddings) f.push_back("scaled embeddings");
  if (c.ffn_act != FfnActivation::kSilu) f.push_back("GeGLU");
  if (c.attn_softcap > 0 || c.final_softcap > 0) f.push_back("logit soft-capping");
  if (c.query_scale > 0 && c.query_scale != 1.0f / std::sqrt(static_cast<float>(c.head_dim))) {
    f.push_back("a query scale other than 1/sqrt(head_dim)");
  }
  if (c.n_rot > 0 && c.n_rot != c.head_dim) f.push_back("partial rotary embeddings");
  if (c.has_sliding_window()) {
    f.push_back("sliding-window attention");
  } else if (!c.layers.empty()) {
    f.push_back("per-layer RoPE bases");
  }
  return absl::StrJoin(f, ", ");
}

absl::Status CheckCudaKvCache(const KvCache& cache) {
  if (cache.num_tables() == 1) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the CUDA kernels read one block table per sequence, but this KV cache has ",
      cache.num_tables(), " (sliding-window layer groups: ", cache.layer_groups().Describe(),
      "); run this model on the CPU backend"));
}

}  // namespace pinfer
