// ComputePerplexity: drives the CPU backend directly over a one-sequence paged KV cache, asking
// for the logits of every position of a batch, and scores each chunk's second half.
#include "engine/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/cpu_backend.h"
#include "kvcache/kv_cache.h"

namespace pinfer {
namespace {

// log_softmax of logits[n] into out[n]; the sum runs in double, as llama-perplexity's does.
void LogSoftmax(const float* logits, int n, float* out) {
  float mx = logits[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int i = 0; i < n; ++i) out[i] = static_cast<float>(logits[i] - lse);
}

}  // namespace

absl::StatusOr<PerplexityPlan> PlanPerplexity(const Model& model, std::string_view text, int n_ctx,
                                              int max_chunks) {
  if (n_ctx < 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("context ", n_ctx, " is too short to score; use --ctx 4 or more"));
  }
  PerplexityPlan p;
  p.tokens = model.tokenizer().Encode(text, /*add_special=*/true);
  p.n_ctx = n_ctx;
  p.first = n_ctx / 2;
  if (static_cast<int64_t>(p.tokens.size()) < 2 * static_cast<int64_t>(n_ctx)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the text tokenizes to only ", p.tokens.size(), " tokens; perplexity with a context of ",
        n_ctx, " needs at least ", 2 * n_ctx, " (give a longer text or a smaller --ctx)"));
  }
  p.n_chunks = static_cast<int>(p.tokens.size() / n_ctx);
  if (max_chunks > 0) p.n_chunks = std::min(p.n_chunks, max_chunks);
  return p;
}

absl::StatusOr<PerplexityResult> ComputePerplexity(const Model& model, const PerplexityPlan& plan,
                                                   const PerplexityOptions& options,
                                                   const PerplexityCallbacks& callbacks) {
  const ModelConfig& c = model.config();
  const int n_ctx = plan.n_ctx;
  const int n_batch = options.n_batch > 0 ? options.n_batch : n_ctx;
  if (n_batch > n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", n_batch,
                                                   " is larger than the context ", n_ctx,
                                                   "; use --batch ", n_ctx, " or less"));
  }
  if (n_ctx > c.context_length && c.context_length > 0) {
    return absl::InvalidArgumentError(absl::StrCat("context ", n_ctx, " exceeds the model's ",
                                                   c.context_length, "; use a smaller --ctx"));
  }
  KvCacheConfig kc;
  kc.n_layers = c.n_layers;
  kc.n_kv_heads = c.n_kv_heads;
  kc.head_dim = c.head_dim;
  kc.dtype = options.kv_dtype;
  kc.layout = KvLayout::kPaged;
  kc.block_size = 16;
  kc.max_model_len = n_ctx;
  kc.max_num_seqs = 1;
  kc.num_blocks = (n_ctx + kc.block_size - 1) / kc.block_size;
  kc.prefix_caching = false;
  absl::StatusOr<std::unique_ptr<KvCache>> cache = KvCache::Create(kc);
  if (!cache.ok()) return cache.status();
  CpuBackend backend(model, n_batch, options.threads);

  const int n_vocab = c.n_vocab;
  const int32_t bos = model.tokenizer().bos();
  const bool add_bos = model.tokenizer().spec().add_bos && bos >= 0;
  std::vector<float> logits(static_cast<size_t>(n_batch) * n_vocab);
  std::vector<float> chunk_logits(static_cast<size_t>(n_ctx) * n_vocab);
  std::vector<float> lp(n_vocab);

  const auto t0 = std::chrono::steady_clock::now();
  double nll = 0, nll2 = 0;
  int64_t count = 0, index = 0;
  for (int ch = 0; ch < plan.n_chunks; ++ch) {
    const int start = ch * n_ctx;
    std::vector<int32_t> toks(plan.tokens.begin() + start, plan.tokens.begin() + start + n_ctx);
    if (add_bos) toks[0] = bos;
    const SeqId id = 1;
    if (absl::Status s = (*cache)->AddSequence(id); !s.ok()) return s;
    for (int b = 0; b < n_ctx; b += n_batch) {
      const int n = std::min(n_batch, n_ctx - b);
      ForwardBatch batch;
      // Only the scored half needs the output projection.
      for (int k = 0; k < n; ++k) batch.Add(toks[b + k], b + k, id, b + k >= plan.first);
      absl::Status s = (*cache)->Append(id, std::span<const int32_t>(toks.data() + b, n));
      if (s.ok()) s = backend.Forward(batch, **cache, logits.data());
      if (!s.ok()) {
        (*cache)->Free(id);
        return s;
      }
      for (size_t j = 0; j < batch.logit_rows.size(); ++j) {
        const float* row = logits.data() + j * n_vocab;
        std::copy(row, row + n_vocab,
                  chunk_logits.begin() + static_cast<size_t>(b + batch.logit_rows[j]) * n_vocab);
      }
    }
    (*cache)->Free(id);
    // Logits at position i predict the chunk's token i + 1.
    for (int i = plan.first; i < n_ctx - 1; ++i) {
      const int32_t target = plan.tokens[start + i + 1];
      LogSoftmax(chunk_logits.data() + static_cast<size_t>(i) * n_vocab, n_vocab, lp.data());
      const double v = -static_cast<double>(lp[target]);
      nll += v;
      nll2 += v * v;
      ++count;
      if (callbacks.on_log_probs) {
        if (absl::Status s = callbacks.on_log_probs(index, lp.data(), n_vocab, target); !s.ok())
          return s;
      }
      ++index;
    }
    if (callbacks.on_chunk) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      callbacks.on_chunk(ch + 1, plan.n_chunks, std::exp(nll / count), secs);
    }
  }
  PerplexityResult r;
  r.count = count;
  r.n_chunks = plan.n_chunks;
  r.mean_nll = nll / count;
  r.ppl = std::exp(r.mean_nll);
  const double var = nll2 / count - r.mean_nll * r.mean_nll;
  r.ppl_stderr = var > 0 && count > 1 ? r.ppl * std::sqrt(var / (count - 1)) : 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace pinfer
