#include "engine/backend.h"

#include "absl/strings/str_cat.h"

namespace pinfer {

absl::Status ValidateBatch(const ForwardBatch& batch, const KvCache& cache, int n_vocab,
                           int max_tokens) {
  const int n = batch.size();
  if (n > max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("a step of ", n, " tokens exceeds the ",
                                                   max_tokens, " this backend was sized for"));
  }
  const int bs = cache.block_size();
  for (int t = 0; t < n; ++t) {
    const int32_t tok = batch.tokens[t];
    if (tok < 0 || tok >= n_vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", tok, " is outside the vocabulary of ", n_vocab));
    }
    const SeqId seq = batch.seq_ids[t];
    const int pos = batch.positions[t];
    if (pos < 0 || pos >= cache.num_tokens(seq)) {
      return absl::FailedPreconditionError(
          absl::StrCat("sequence ", seq, " has no KV slot for position ", pos));
    }
    if (static_cast<size_t>(pos / bs) >= cache.BlockTable(seq).size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("sequence ", seq, "'s block table does not reach position ", pos));
    }
  }
  return absl::OkStatus();
}

}  // namespace pinfer
