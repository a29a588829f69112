// A benchmark's requests from its lengths and arrivals: prompts of token ids or of text
// (bench/serve/prompts.h), the same for every server given the same seed and tokenizer.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/serve/client.h"
#include "bench/serve/prompts.h"
#include "bench/serve/workload.h"

namespace pinfer::bench_serve {

enum class PromptKind { kIds, kText };
absl::StatusOr<PromptKind> ParsePromptKind(std::string_view name);  // ids | text

struct PromptSource {
  PromptKind kind = PromptKind::kIds;
  // ids: > 0 draws ids from [3, vocab_size) without asking the server; 0 draws them from the
  // ids /tokenize makes of a seeded text.
  int vocab_size = 0;
};

// lengths and arrivals of equal size. tokenize is called for text prompts, and for ids
// unless vocab_size is set; its NotFound becomes an error saying what to pass instead.
absl::StatusOr<std::vector<BenchRequest>> BuildRequests(const std::vector<LengthPair>& lengths,
                                                        const std::vector<double>& arrivals,
                                                        const PromptSource& source,
                                                        const TokenizeFn& tokenize, uint64_t seed);

}  // namespace pinfer::bench_serve
