#include "engine/grammar/token_vocab.h"

#include <algorithm>
#include <numeric>

namespace pinfer::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> eog_ids)
    : bytes_(std::move(token_bytes)), eog_(bytes_.size(), false) {
  for (int32_t id : eog_ids) {
    if (id >= 0 && id < n_vocab() && !eog_[id]) {
      eog_[id] = true;
      eog_ids_.push_back(id);
    }
  }
  std::vector<int32_t> order;
  for (int32_t id = 0; id < n_vocab(); ++id) {
    if (!bytes_[id].empty() && !eog_[id]) order.push_back(id);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  Trie& t = trie_;
  auto add_node = [&](int32_t depth, uint8_t b) {
    t.depth.push_back(depth);
    t.byte.push_back(b);
    t.subtree_end.push_back(0);
    t.token_begin.push_back(static_cast<int32_t>(t.token_ids.size()));
  };
  add_node(0, 0);
  std::vector<int32_t> path = {0};  // nodes of the current prefix, root first
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = bytes_[id];
    size_t lcp = 0;
    if (prev) {
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    }
    // Sorted order: the nodes below the common prefix are finished.
    while (path.size() > lcp + 1) {
      t.subtree_end[path.back()] = static_cast<int32_t>(t.depth.size());
      path.pop_back();
    }
    for (size_t k = lcp; k < s.size(); ++k) {
      path.push_back(static_cast<int32_t>(t.depth.size()));
      add_node(static_cast<int32_t>(k + 1), static_cast<uint8_t>(s[k]));
    }
    // The token ends at the newest node (a string's node is created last, or it repeats the
    // previous string), so each node's tokens are contiguous.
    t.token_ids.push_back(id);
    t.max_depth = std::max(t.max_depth, static_cast<int32_t>(s.size()));
    prev = &s;
  }
  while (!path.empty()) {
    t.subtree_end[path.back()] = static_cast<int32_t>(t.depth.size());
    path.pop_back();
  }
  t.token_begin.push_back(static_cast<int32_t>(t.token_ids.size()));
}

}  // namespace pinfer::grammar
