#include "engine/score.h"

#include <algorithm>

namespace pinfer {

absl::StatusOr<std::vector<float>> ScoreSequence(const Model& model, Backend& backend,
                                                 KvDtype kv_dtype, std::span<const int32_t> tokens,
                                                 int chunk) {
  const ModelConfig& c = model.config();
  const int n = static_cast<int>(tokens.size());
  KvCacheConfig kc = KvCacheConfigFor(c, kv_dtype);
  kc.max_model_len = std::max(n, 1);
  kc.max_num_seqs = 1;
  kc.block_size = 16;
  kc.num_blocks = (n + kc.block_size - 1) / kc.block_size;
  kc.prefix_caching = false;
  auto cache = KvCache::Create(kc);
  if (!cache.ok()) return cache.status();
  if (absl::Status s = (*cache)->AddSequence(0); !s.ok()) return s;
  std::vector<float> logits(static_cast<size_t>(n) * c.n_vocab);
  for (int start = 0; start < n; start += chunk) {
    const int count = std::min(chunk, n - start);
    if (absl::Status s = (*cache)->Append(0, tokens.subspan(start, count)); !s.ok()) return s;
    ForwardBatch batch;
    for (int j = 0; j < count; ++j) batch.Add(tokens[start + j], start + j, 0, true);
    absl::Status s =
        backend.Forward(batch, **cache, logits.data() + static_cast<size_t>(start) * c.n_vocab);
    if (!s.ok()) return s;
  }
  return logits;
}

}  // namespace pinfer
