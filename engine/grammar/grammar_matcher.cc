#include "engine/grammar/grammar_matcher.h"

#include <algorithm>
#include <cstring>

namespace pinfer::grammar {
namespace {

constexpr int32_t kUnknown = -2;
// A mask is cached when computing it visited at least this many trie nodes: below that the
// walk costs about as much as copying a cached mask of a large vocabulary.
constexpr int64_t kCacheWalkNodes = 512;

uint64_t NodeKey(int32_t pos, int32_t parent) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) |
         static_cast<uint32_t>(parent + 1);
}

}  // namespace

GrammarAutomaton::GrammarAutomaton(std::shared_ptr<const Grammar> grammar,
                                   std::shared_ptr<const TokenVocabulary> vocab)
    : g_(std::move(grammar)), vocab_(std::move(vocab)), n_classes_(g_->n_byte_classes) {
  absl::MutexLock lock(&mu_);
  new_tops_.clear();
  new_accepting_ = false;
  visited_.clear();
  for (int32_t pos : g_->rule_alternatives[g_->root]) Expand(pos, -1);
  initial_ = InternState();
}

int32_t GrammarAutomaton::InternNode(int32_t pos, int32_t parent) {
  auto [it, fresh] = node_ids_.try_emplace(NodeKey(pos, parent), 0);
  if (fresh) {
    if (static_cast<int32_t>(nodes_.size()) >= kMaxNodes) {
      node_ids_.erase(it);
      stats_.overflowed = true;
      return kDeadState;
    }
    const int32_t depth = parent < 0 ? 0 : nodes_[parent].depth + 1;
    it->second = static_cast<int32_t>(nodes_.size());
    nodes_.push_back({pos, parent, depth});
  }
  return it->second;
}

// Adds the stacks reached from position `pos` returning to node `ret` to new_tops_: a byte
// set is a top; a rule expands into its alternatives (returning to the position after it,
// or straight to `ret` when nothing follows: right recursion keeps the stack flat); the end
// of an alternative returns to `ret`'s position, or accepts at the bottom.
void GrammarAutomaton::Expand(int32_t pos, int32_t ret) {
  work_.clear();
  work_.push_back({pos, ret});
  while (!work_.empty()) {
    auto [p, r] = work_.back();
    work_.pop_back();
    if (!visited_.insert(NodeKey(p, r)).second) continue;
    const Element& e = g_->elements[p];
    if (e.kind == Element::Kind::kBytes) {
      const int32_t n = InternNode(p, r);
      if (n != kDeadState) new_tops_.push_back(n);
    } else if (e.kind == Element::Kind::kRule) {
      int32_t next = r;
      if (g_->elements[p + 1].kind != Element::Kind::kEnd) {
        if (r >= 0 && nodes_[r].depth >= kMaxStackDepth) continue;
        next = InternNode(p + 1, r);
        if (next == kDeadState) continue;
      }
      for (int32_t alt : g_->rule_alternatives[e.value]) work_.push_back({alt, next});
    } else if (r < 0) {
      new_accepting_ = true;
    } else {
      work_.push_back({nodes_[r].pos, nodes_[r].parent});
    }
  }
}

int32_t GrammarAutomaton::InternState() {
  std::sort(new_tops_.begin(), new_tops_.end());
  new_tops_.erase(std::unique(new_tops_.begin(), new_tops_.end()), new_tops_.end());
  if (new_tops_.empty() && !new_accepting_) return kDeadState;
  std::vector<int32_t> key = new_tops_;
  key.push_back(new_accepting_ ? -1 : -2);
  auto it = state_ids_.find(key);
  if (it != state_ids_.end()) return it->second;
  if (static_cast<int32_t>(states_.size()) >= kMaxStates) {
    stats_.overflowed = true;
    return kDeadState;
  }
  const int32_t id = static_cast<int32_t>(states_.size());
  states_.push_back({new_tops_, new_accepting_, -1});
  state_ids_.emplace(std::move(key), id);
  trans_.resize(trans_.size() + n_classes_, kUnknown);
  return id;
}

inline int32_t GrammarAutomaton::Step(int32_t state, uint8_t byte) {
  const int32_t t = trans_[static_cast<size_t>(state) * n_classes_ + g_->byte_class[byte]];
  return t != kUnknown ? t : StepSlow(state, byte);
}

int32_t GrammarAutomaton::StepSlow(int32_t state, uint8_t byte) {
  new_tops_.clear();
  new_accepting_ = false;
  visited_.clear();
  // states_ may grow below: copy the tops first.
  const std::vector<int32_t> tops = states_[state].tops;
  for (int32_t top : tops) {
    const Node n = nodes_[top];
    if (g_->byte_sets[g_->elements[n.pos].value].test(byte)) Expand(n.pos + 1, n.parent);
  }
  const int32_t next = InternState();
  trans_[static_cast<size_t>(state) * n_classes_ + g_->byte_class[byte]] = next;
  return next;
}

int32_t GrammarAutomaton::Advance(int32_t state, std::string_view bytes) {
  absl::MutexLock lock(&mu_);
  for (char c : bytes) {
    if (state == kDeadState) break;
    state = Step(state, static_cast<uint8_t>(c));
  }
  return state;
}

bool GrammarAutomaton::IsAccepting(int32_t state) {
  absl::MutexLock lock(&mu_);
  return state != kDeadState && states_[state].accepting;
}

bool GrammarAutomaton::CanContinue(int32_t state) {
  absl::MutexLock lock(&mu_);
  return state != kDeadState && !states_[state].tops.empty();
}

// Depth-first over the trie in its stored order: a node's state is its parent's (kept per
// depth in walk_states_) stepped by the node's byte; a dead state skips the subtree.
int64_t GrammarAutomaton::WalkTrie(int32_t state, uint64_t* words) {
  const TokenVocabulary::Trie& t = vocab_->trie();
  walk_states_.resize(t.max_depth + 1);
  walk_states_[0] = state;
  const int32_t n = static_cast<int32_t>(t.depth.size());
  int64_t visited = 0;
  for (int32_t i = 1; i < n;) {
    ++visited;
    const int32_t d = t.depth[i];
    const int32_t s = Step(walk_states_[d - 1], t.byte[i]);
    if (s == kDeadState) {
      i = t.subtree_end[i];
      continue;
    }
    walk_states_[d] = s;
    for (int32_t k = t.token_begin[i]; k < t.token_begin[i + 1]; ++k) {
      const int32_t id = t.token_ids[k];
      words[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
  return visited;
}

void GrammarAutomaton::FillMask(int32_t state, std::span<uint64_t> words) {
  std::fill(words.begin(), words.end(), 0);
  if (state == kDeadState) return;
  absl::MutexLock lock(&mu_);
  if (states_[state].mask >= 0) {
    const auto& m = masks_[states_[state].mask];
    std::memcpy(words.data(), m.data(), std::min(words.size(), m.size()) * sizeof(uint64_t));
    ++stats_.mask_cache_hits;
  } else {
    const int64_t visited = WalkTrie(state, words.data());
    ++stats_.mask_walks;
    stats_.trie_nodes_visited += visited;
    const size_t bytes = words.size() * sizeof(uint64_t);
    if (visited >= kCacheWalkNodes && (masks_.size() + 1) * bytes <= kMaskCacheBytes) {
      states_[state].mask = static_cast<int32_t>(masks_.size());
      masks_.emplace_back(words.begin(), words.end());
    }
  }
  if (states_[state].accepting) {
    for (int32_t id : vocab_->eog_ids()) words[id >> 6] |= uint64_t{1} << (id & 63);
  }
}

AutomatonStats GrammarAutomaton::stats() {
  absl::MutexLock lock(&mu_);
  AutomatonStats s = stats_;
  s.states = static_cast<int32_t>(states_.size());
  s.nodes = static_cast<int32_t>(nodes_.size());
  s.cached_masks = static_cast<int32_t>(masks_.size());
  return s;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<GrammarAutomaton> automaton)
    : automaton_(std::move(automaton)), state_(automaton_->initial_state()) {}

bool GrammarMatcher::AcceptToken(int32_t id) {
  if (finished_ || id < 0 || id >= automaton_->vocab().n_vocab()) return false;
  if (automaton_->vocab().is_eog(id)) {
    if (!automaton_->IsAccepting(state_)) return false;
    finished_ = true;
    return true;
  }
  const std::string& bytes = automaton_->vocab().bytes(id);
  if (bytes.empty()) return false;
  return AcceptBytes(bytes);
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (finished_) return false;
  const int32_t next = automaton_->Advance(state_, bytes);
  if (next == kDeadState) return false;
  state_ = next;
  return true;
}

void GrammarMatcher::Reset() {
  state_ = automaton_->initial_state();
  finished_ = false;
}

absl::Status GrammarMatcher::Replay(std::span<const int32_t> tokens) {
  Reset();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!AcceptToken(tokens[i])) {
      return absl::InvalidArgumentError("grammar refuses token " + std::to_string(tokens[i]) +
                                        " at output position " + std::to_string(i) +
                                        " while replaying a sequence");
    }
  }
  return absl::OkStatus();
}

void GrammarMatcher::FillMask(std::span<uint64_t> words) const {
  if (finished_) {
    std::fill(words.begin(), words.end(), 0);
    return;
  }
  automaton_->FillMask(state_, words);
}

bool GrammarMatcher::IsAccepting() const { return !finished_ && automaton_->IsAccepting(state_); }

bool GrammarMatcher::CanContinue() const { return !finished_ && automaton_->CanContinue(state_); }

}  // namespace pinfer::grammar
