// ComputePerplexity: drives a backend (the CPU's unless told) directly over a one-sequence paged KV
// cache, asking for the logits of every position of a batch, and scores each chunk's second half.
#include "engine/eval/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/eval/score.h"

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
  std::unique_ptr<Backend> made;
  if (options.make_backend) {
    absl::StatusOr<std::unique_ptr<Backend>> b = options.make_backend(n_batch);
    if (!b.ok()) return b.status();
    made = std::move(*b);
  } else {
    made = std::make_unique<CpuBackend>(model, n_batch, options.threads);
  }
  Backend& backend = *made;

  const int n_vocab = c.n_vocab;
  const int32_t bos = model.tokenizer().bos();
  const bool add_bos = model.tokenizer().spec().add_bos && bos >= 0;
  std::vector<float> lp(n_vocab);

  const auto t0 = std::chrono::steady_clock::now();
  double nll = 0, nll2 = 0;
  int64_t count = 0, index = 0;
  for (int ch = 0; ch < plan.n_chunks; ++ch) {
    const int start = ch * n_ctx;
    std::vector<int32_t> toks(plan.tokens.begin() + start, plan.tokens.begin() + start + n_ctx);
    if (add_bos) toks[0] = bos;
    // Only the scored half needs the output projection.
    absl::StatusOr<std::vector<float>> scored =
        ScoreSequence(model, backend, options.kv_dtype, toks, n_batch, plan.first);
    if (!scored.ok()) return scored.status();
    // Logits at position i predict the chunk's token i + 1.
    for (int i = plan.first; i < n_ctx - 1; ++i) {
      const int32_t target = plan.tokens[start + i + 1];
      LogSoftmax(scored->data() + static_cast<size_t>(i - plan.first) * n_vocab, n_vocab,
                 lp.data());
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
