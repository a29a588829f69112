// The vocabulary as a grammar sees it: each token's bytes, the end-of-generation ids, and a
// trie of the byte strings in depth-first order that the mask computation walks against a
// matcher state (grammar_matcher.h). Built once per tokenizer; immutable; shared.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace pinfer::grammar {

class TokenVocabulary {
 public:
  // token_bytes[id]: the bytes token id stands for; empty for tokens a grammar never allows
  // (control tokens, unused ids). eog_ids: end-of-generation tokens, allowed exactly when the
  // grammar accepts; their bytes are ignored.
  TokenVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> eog_ids);

  int32_t n_vocab() const { return static_cast<int32_t>(bytes_.size()); }
  // Words of a token mask: bit (id % 64) of word (id / 64) set = token id allowed.
  size_t mask_words() const { return (bytes_.size() + 63) / 64; }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  bool is_eog(int32_t id) const { return id >= 0 && id < n_vocab() && eog_[id]; }
  std::span<const int32_t> eog_ids() const { return eog_ids_; }

  // The trie: node 0 is the root (the empty string). Node i > 0 is reached from its parent
  // (the nearest earlier node of depth depth[i] - 1) by byte[i]; its descendants are the
  // nodes i+1 .. subtree_end[i]-1; the tokens whose bytes end at it are
  // token_ids[token_begin[i] .. token_begin[i+1]).
  struct Trie {
    std::vector<int32_t> depth;
    std::vector<uint8_t> byte;
    std::vector<int32_t> subtree_end;
    std::vector<int32_t> token_begin;  // n_nodes + 1 entries
    std::vector<int32_t> token_ids;
    int32_t max_depth = 0;
  };
  const Trie& trie() const { return trie_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<bool> eog_;
  std::vector<int32_t> eog_ids_;
  Trie trie_;
};

}  // namespace pinfer::grammar
