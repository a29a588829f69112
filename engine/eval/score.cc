#include "engine/eval/score.h"

#include <algorithm>

namespace pinfer {

absl::StatusOr<std::vector<float>> ScoreSequence(const Model& model, Backend& backend,
                                                 KvDtype kv_dtype, std::span<const int32_t> tokens,
                                                 int chunk, int first) {
  const ModelConfig& c = model.config();
  const int n = static_cast<int>(tokens.size());
  first = std::clamp(first, 0, n);
  KvCacheConfig kc = KvCacheConfigFor(c, kv_dtype);
  // One table holding every layer: a scoring pass never lets a block go (no MarkComputed),
  // so window layer groups would save nothing; the attention masks the windows.
  kc.layer_windows.clear();
  kc.max_model_len = std::max(n, 1);
  kc.max_num_seqs = 1;
  kc.block_size = 16;
  kc.num_blocks = (kc.max_model_len + kc.block_size - 1) / kc.block_size;
  kc.prefix_caching = false;
  // The backend's buffers for contexts of this length (the CPU's workspace is committed here;
  // called again with the same length, nothing changes).
  if (absl::Status s = backend.ReserveForLimits(1, kc.max_model_len, kc.block_size); !s.ok()) {
    return s;
  }
  if (absl::Status s = backend.Commit(/*lock_memory=*/false); !s.ok()) return s;
  // A device backend keeps the pool in its own memory (nullptr: host memory).
  auto block_bytes = KvBlockBytes(kc);
  if (!block_bytes.ok()) return block_bytes.status();
  auto storage = backend.MakeKvStorage(*block_bytes, kc.num_blocks);
  if (!storage.ok()) return storage.status();
  auto cache = KvCache::Create(kc, std::move(*storage));
  if (!cache.ok()) return cache.status();
  if (absl::Status s = (*cache)->AddSequence(0); !s.ok()) return s;
  std::vector<float> logits(static_cast<size_t>(n - first) * c.n_vocab);
  for (int start = 0; start < n; start += chunk) {
    const int count = std::min(chunk, n - start);
    if (absl::Status s = (*cache)->Append(0, count); !s.ok()) return s;
    ForwardBatch batch;
    for (int j = 0; j < count; ++j) batch.Add(tokens[start + j], start + j, 0, start + j >= first);
    // The wanted rows of this chunk are contiguous and in order: they land at their position.
    const size_t row0 = static_cast<size_t>(std::max(start, first) - first);
    absl::Status s = backend.Forward(batch, **cache, logits.data() + row0 * c.n_vocab);
    if (!s.ok()) return s;
  }
  return logits;
}

}  // namespace pinfer
