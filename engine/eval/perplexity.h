// Perplexity of a model over a text, computed as llama.cpp's llama-perplexity does:
// the whole text is tokenized once (BOS at the start when the model adds one), cut into
// chunks of n_ctx tokens (a tail shorter than n_ctx is dropped), and each chunk is evaluated
// from position 0 with an empty KV cache, its first token replaced by BOS when the model adds
// BOS. Only the second half is scored: the logits at positions first = n_ctx/2 .. n_ctx-2
// predict tokens first+1 .. n_ctx-1 (n_ctx - 1 - first tokens per chunk). PPL = exp(mean NLL)
// and its standard error is PPL * sqrt((mean(NLL^2) - mean(NLL)^2) / (count - 1)).
//
// The forward pass runs chunks in batches of n_batch tokens on the CPU backend (or the one
// options.make_backend makes) over a paged KV cache of the given format; the CPU backend is
// batch-invariant, so n_batch never changes the result there.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/model/model.h"
#include "kvcache/kv_dtype.h"

namespace pinfer {

struct PerplexityOptions {
  int n_ctx = 512;
  int n_batch = 0;  // tokens per forward pass; 0: n_ctx. At most n_ctx.
  KvDtype kv_dtype = KvDtype::kF16;
  int threads = 0;     // 0: all hardware threads
  int max_chunks = 0;  // 0: all
  // The backend to run on, for steps of up to max_tokens tokens; empty: the CPU backend.
  std::function<absl::StatusOr<std::unique_ptr<Backend>>(int max_tokens)> make_backend;
};

// The chunking of a tokenized text.
struct PerplexityPlan {
  std::vector<int32_t> tokens;  // the whole text, BOS at the start when the model adds one
  int n_ctx = 0, first = 0, n_chunks = 0;
  int scored_per_chunk() const { return n_ctx - 1 - first; }
  int64_t scored() const { return static_cast<int64_t>(n_chunks) * scored_per_chunk(); }
};

// InvalidArgument when the text has fewer than 2 * n_ctx tokens (llama-perplexity's rule).
absl::StatusOr<PerplexityPlan> PlanPerplexity(const Model& model, std::string_view text, int n_ctx,
                                              int max_chunks = 0);

struct PerplexityResult {
  double ppl = 0, ppl_stderr = 0;
  double mean_nll = 0;
  int64_t count = 0;  // tokens scored
  int n_chunks = 0;
  double seconds = 0;
};

struct PerplexityCallbacks {
  // After each chunk: chunks done, the running estimate so far.
  std::function<void(int done, int n_chunks, double ppl_so_far, double seconds)> on_chunk;
  // For each scored position in order (index 0 .. plan.scored()-1): the log-softmax of its
  // logits (n_vocab values) and the token it predicts. A non-OK status stops the run.
  std::function<absl::Status(int64_t index, const float* log_probs, int n_vocab, int32_t target)>
      on_log_probs;
};

absl::StatusOr<PerplexityResult> ComputePerplexity(const Model& model, const PerplexityPlan& plan,
                                                   const PerplexityOptions& options,
                                                   const PerplexityCallbacks& callbacks = {});

}  // namespace pinfer
