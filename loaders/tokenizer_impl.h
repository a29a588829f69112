// Internals shared by the SentencePiece and byte-level BPE tokenizers (not part of the API).
#pragma once

#include <array>
#include <cstdint>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "loaders/tokenizer.h"

namespace pinfer::tokenizer_internal {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using PieceMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// A run of input: either literal text or an already-recognised special token.
struct Fragment {
  int32_t token = -1;  // >= 0: a special token
  std::string_view text;
};

// One symbol of the merge loop: a byte span of the word being merged, linked to neighbours.
struct Symbol {
  int32_t prev = -1, next = -1;
  uint32_t start = 0, len = 0;
  int32_t id = -1;  // vocab id of the span, -1 when the span is not a token
};

// Splits a word into one symbol per UTF-8 character.
std::vector<Symbol> CharSymbols(std::string_view word, const PieceMap& pieces);

// Greedy pairwise merging, best pair first (ties: leftmost first), as SentencePiece-BPE and
// GPT-2 BPE both do. score(a, b, &priority, &id) says whether a+b may merge, with what
// priority (higher first) and into which token.
template <typename ScoreFn>
void MergeSymbols(std::vector<Symbol>& syms, ScoreFn score) {
  struct Candidate {
    float priority;
    int32_t left;
    uint32_t size;
    int32_t id;
    bool operator<(const Candidate& o) const {
      return priority < o.priority || (priority == o.priority && left > o.left);
    }
  };
  std::priority_queue<Candidate> queue;
  auto try_add = [&](int32_t l) {
    if (l < 0 || syms[l].next < 0) return;
    const Symbol& a = syms[l];
    const Symbol& b = syms[a.next];
    float priority = 0;
    int32_t id = -1;
    if (score(a, b, &priority, &id)) queue.push({priority, l, a.len + b.len, id});
  };
  for (int32_t i = 0; i + 1 < (int32_t)syms.size(); ++i) try_add(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = syms[c.left];
    if (left.len == 0 || left.next < 0) continue;
    Symbol& right = syms[left.next];
    if (right.len == 0 || left.len + right.len != c.size) continue;  // stale
    left.len += right.len;
    left.id = c.id;
    right.len = 0;
    left.next = right.next;
    if (left.next >= 0) syms[left.next].prev = c.left;
    try_add(left.prev);
    try_add(c.left);
  }
}

// State shared by both kinds: piece look-up, special-token splitting, decoded bytes.
class TokenizerBase : public Tokenizer {
 public:
  std::string TokenBytes(int32_t id) const override;

 protected:
  explicit TokenizerBase(TokenizerSpec spec);
  // Fills bytes_ (via PieceBytes), pieces_ and the special-token index. Called by subclasses.
  absl::Status InitCommon();
  virtual std::string PieceBytes(int32_t id) const = 0;

  TokenType type(int32_t id) const {
    return spec_.types.empty() ? TokenType::kNormal : spec_.types[id];
  }
  // Control tokens split out only when parse_special; user-defined tokens always.
  std::vector<Fragment> SplitSpecial(std::string_view text, bool parse_special) const;
  // Merge-rank table from spec_.merges: (left id, right id) -> (rank, merged id).
  absl::Status BuildMergeRanks();
  bool MergeRank(int32_t a, int32_t b, float* priority, int32_t* id) const;

  PieceMap pieces_;                 // mergeable pieces (normal / user-defined / undefined)
  std::vector<std::string> bytes_;  // id -> decoded bytes
  std::array<std::vector<int32_t>, 256> specials_by_first_byte_;  // longest first
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merge_ranks_;
};

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeSentencePiece(TokenizerSpec spec);
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeBytePairGpt2(TokenizerSpec spec);

}  // namespace pinfer::tokenizer_internal
