#include "engine/backend.h"

#include <algorithm>
#include <span>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pinfer {
namespace {

// Every block table of the sequence reaches position pos and still holds its block: a
// sliding-window table lets go of the blocks before the window of the sequence's last
// computed position (KvCache::MarkComputed), and those positions' K/V cannot be written again.
absl::Status CheckSlot(const KvCache& cache, SeqId seq, int pos) {
  const size_t k = static_cast<size_t>(pos / cache.block_size());
  for (int t = 0; t < cache.num_tables(); ++t) {
    const std::span<const int32_t> table = cache.BlockTable(seq, t);
    if (k >= table.size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("sequence ", seq, "'s block table does not reach position ", pos));
    }
    if (table[k] == kNoBlock) {
      return absl::FailedPreconditionError(
          absl::StrCat("sequence ", seq, "'s window-", cache.layer_groups().window_of_table(t),
                       " block table let go of position ", pos,
                       " (before the window of its computed positions); a step cannot write it"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateBatch(const ForwardBatch& batch, const KvCache& cache, int n_vocab,
                           int max_tokens) {
  const int n = batch.size();
  if (n > max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("a step of ", n, " tokens exceeds the ",
                                                   max_tokens, " this backend was sized for"));
  }
  if (batch.positions.size() != batch.tokens.size() ||
      batch.seq_ids.size() != batch.tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a step of ", n, " tokens has ", batch.positions.size(), " positions and ",
                     batch.seq_ids.size(), " sequence ids; build it with ForwardBatch::Add"));
  }
  std::vector<std::tuple<SeqId, int, int>> slots;  // (sequence, position, token) of each token
  slots.reserve(static_cast<size_t>(n));
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
    if (absl::Status s = CheckSlot(cache, seq, pos); !s.ok()) return s;
    slots.emplace_back(seq, pos, t);
  }
  std::sort(slots.begin(), slots.end());
  for (size_t i = 1; i < slots.size(); ++i) {
    const auto& [seq, pos, first] = slots[i - 1];
    if (std::get<0>(slots[i]) == seq && std::get<1>(slots[i]) == pos) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens ", first, " and ", std::get<2>(slots[i]),
                       " of the step both write sequence ", seq, "'s position ", pos,
                       "; each token of a step must name its own (sequence, position)"));
    }
  }
  int prev = -1;
  for (const int32_t row : batch.logit_rows) {
    if (row <= prev || row >= n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "logit row ", row, " is not a token of the step (0..", n - 1,
          ") after the one before it (", prev, "): logit_rows must increase within the step"));
    }
    prev = row;
  }
  return absl::OkStatus();
}

}  // namespace pinfer
