// Logits at every position of a fixed token sequence (teacher forcing), for quality
// measurements: KV-format comparisons, perplexity, KL divergence.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/model/model.h"
#include "kvcache/kv_cache.h"

namespace pinfer {

// Runs tokens[0..n) as one sequence from position 0 in chunks of at most `chunk` tokens
// through `backend`, with a fresh KV cache of `kv_dtype`, and returns the logits after each
// token from position `first` on: [(n - first) x n_vocab], row i predicts tokens[first + i + 1].
// Positions before `first` fill the cache but skip the output projection.
absl::StatusOr<std::vector<float>> ScoreSequence(const Model& model, Backend& backend,
                                                 KvDtype kv_dtype, std::span<const int32_t> tokens,
                                                 int chunk, int first = 0);

}  // namespace pinfer
