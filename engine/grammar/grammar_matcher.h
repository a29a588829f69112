// Runs a compiled grammar over bytes and tokens.
//
// A matcher state is a set of pushdown stacks (positions in the grammar, each below it the
// position to return to), expanded until every stack's top is a byte set. Stacks are
// hash-consed (a node = position + parent node) and states interned, so a state is an int
// and the transition for (state, byte class) is computed once and cached. The token mask of a
// state walks the vocabulary's trie (token_vocab.h), pruning a subtree where the grammar dies,
// and is cached per state when the walk was long enough for the cache to pay.
//
// GrammarAutomaton holds one request's interned states and caches; its matchers (one per
// sequence, n > 1 forks copy theirs) share it. All its methods lock mu_, so sequences of one
// request may run on different threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/token_vocab.h"

namespace pinfer::grammar {

inline constexpr int32_t kDeadState = -1;
inline constexpr int kMaxStackDepth = 2048;          // deeper nesting is not allowed to continue
inline constexpr int32_t kMaxStates = 1 << 18;       // interned states per request
inline constexpr int32_t kMaxNodes = 1 << 22;        // interned stack nodes per request
inline constexpr size_t kMaskCacheBytes = 64 << 20;  // cached masks per request

struct AutomatonStats {
  int32_t states = 0;
  int32_t nodes = 0;
  int32_t cached_masks = 0;
  int64_t mask_walks = 0;  // masks computed by walking the trie
  int64_t mask_cache_hits = 0;
  int64_t trie_nodes_visited = 0;
  bool overflowed = false;  // a budget above was reached: further states are dead
};

class GrammarAutomaton {
 public:
  GrammarAutomaton(std::shared_ptr<const Grammar> grammar,
                   std::shared_ptr<const TokenVocabulary> vocab);

  int32_t initial_state() const { return initial_; }
  // The state after `bytes` from `state`; kDeadState when the grammar rejects them.
  int32_t Advance(int32_t state, std::string_view bytes);
  // The grammar accepts the bytes that led to `state` (an end token may follow).
  bool IsAccepting(int32_t state);
  // Some byte can follow `state` (false: only an end token can).
  bool CanContinue(int32_t state);
  // words[vocab().mask_words()]: bit set for every token allowed in `state`; end tokens are
  // allowed exactly when the state accepts. A dead state allows nothing.
  void FillMask(int32_t state, std::span<uint64_t> words);

  const TokenVocabulary& vocab() const { return *vocab_; }
  AutomatonStats stats();

 private:
  struct State {
    std::vector<int32_t> tops;  // node ids whose position is a byte set, sorted
    bool accepting = false;
    int32_t mask = -1;  // index into masks_ when cached
  };
  struct Node {
    int32_t pos;
    int32_t parent;  // -1: the root rule's stack bottom
    int32_t depth;
  };

  int32_t Step(int32_t state, uint8_t byte) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int32_t StepSlow(int32_t state, uint8_t byte) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Expand(int32_t pos, int32_t ret) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int32_t InternNode(int32_t pos, int32_t parent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int32_t InternState() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t WalkTrie(int32_t state, uint64_t* words) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<const Grammar> g_;
  const std::shared_ptr<const TokenVocabulary> vocab_;
  const int n_classes_;
  int32_t initial_ = kDeadState;

  absl::Mutex mu_;
  std::vector<Node> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, int32_t> node_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<State> states_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::vector<int32_t>, int32_t> state_ids_ ABSL_GUARDED_BY(mu_);
  // trans_[state * n_classes_ + class]: next state, kDeadState, or kUnknown.
  std::vector<int32_t> trans_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<uint64_t>> masks_ ABSL_GUARDED_BY(mu_);
  AutomatonStats stats_ ABSL_GUARDED_BY(mu_);
  // Scratch of one expansion.
  std::vector<std::pair<int32_t, int32_t>> work_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> visited_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> new_tops_ ABSL_GUARDED_BY(mu_);
  bool new_accepting_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int32_t> walk_states_ ABSL_GUARDED_BY(mu_);
};

// One sequence's position in its grammar: a state of a shared automaton. Copy it to fork.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<GrammarAutomaton> automaton);

  // Takes token id when the grammar allows it (an end token only where the grammar accepts;
  // it finishes the matcher); false, state unchanged, otherwise.
  bool AcceptToken(int32_t id);
  // Takes bytes; false, state unchanged, when the grammar rejects them.
  bool AcceptBytes(std::string_view bytes);
  // Restarts from the grammar's start and takes `tokens` (a recomputed sequence's output);
  // InvalidArgument naming the first token the grammar refuses.
  absl::Status Replay(std::span<const int32_t> tokens);
  void Reset();

  // The tokens allowed next (see GrammarAutomaton::FillMask); none once finished.
  void FillMask(std::span<uint64_t> words) const;
  bool IsAccepting() const;                      // an end token may come now
  bool CanContinue() const;                      // a non-end token may come now
  bool IsFinished() const { return finished_; }  // an end token was taken

  const GrammarAutomaton& automaton() const { return *automaton_; }
  size_t mask_words() const { return automaton_->vocab().mask_words(); }

 private:
  std::shared_ptr<GrammarAutomaton> automaton_;
  int32_t state_;
  bool finished_ = false;
};

}  // namespace pinfer::grammar
