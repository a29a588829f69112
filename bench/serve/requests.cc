#include "bench/serve/requests.h"

#include "absl/strings/str_cat.h"

namespace pinfer::bench_serve {
namespace {

absl::Status Explain(const absl::Status& s, PromptKind kind) {
  if (!absl::IsNotFound(s)) return s;
  return absl::FailedPreconditionError(absl::StrCat(
      s.message(),
      kind == PromptKind::kText
          ? ": text prompts need the server's tokenizer; use --prompt-kind ids --vocab-size N"
          : ": pass --vocab-size N to draw prompt ids from [3, N) without it"));
}

}  // namespace

absl::StatusOr<PromptKind> ParsePromptKind(std::string_view name) {
  if (name == "ids") return PromptKind::kIds;
  if (name == "text") return PromptKind::kText;
  return absl::InvalidArgumentError(absl::StrCat("--prompt-kind '", std::string(name),
                                                 "': choose ids (token-id prompts) or text"));
}

absl::StatusOr<std::vector<BenchRequest>> BuildRequests(const std::vector<LengthPair>& lengths,
                                                        const std::vector<double>& arrivals,
                                                        const PromptSource& source,
                                                        const TokenizeFn& tokenize, uint64_t seed) {
  if (lengths.size() != arrivals.size()) {
    return absl::InternalError("BuildRequests: lengths and arrivals differ in number");
  }
  std::vector<BenchRequest> out(lengths.size());
  std::vector<int32_t> pool;
  if (source.kind == PromptKind::kIds) {
    auto p = source.vocab_size > 0 ? VocabPool(source.vocab_size) : TokenizerPool(tokenize, seed);
    if (!p.ok()) return Explain(p.status(), source.kind);
    pool = std::move(*p);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    BenchRequest& r = out[i];
    r.output_len = lengths[i].output_len;
    r.arrival_s = arrivals[i];
    if (source.kind == PromptKind::kIds) {
      r.prompt_ids = IdsPrompt(pool, seed, static_cast<int>(i), lengths[i].prompt_len);
      r.prompt_len = lengths[i].prompt_len;
      continue;
    }
    auto t = FitTextPrompt(tokenize, seed, static_cast<int>(i), lengths[i].prompt_len);
    if (!t.ok()) return Explain(t.status(), source.kind);
    r.prompt_text = std::move(t->text);
    r.prompt_len = t->tokens;
  }
  return out;
}

}  // namespace pinfer::bench_serve
