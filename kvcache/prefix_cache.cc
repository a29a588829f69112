// Hash-chained prefix cache with an O(1) LRU list of idle entries.
#include "kvcache/prefix_cache.h"

#include <algorithm>
#include <cstddef>

namespace pinfer {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

PrefixCache::PrefixCache(int32_t num_blocks, int block_size)
    : block_size_(block_size),
      key_(static_cast<size_t>(num_blocks), 0),
      parent_(static_cast<size_t>(num_blocks), 0),
      table_(static_cast<size_t>(num_blocks), 0),
      tokens_(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size), 0),
      cached_(static_cast<size_t>(num_blocks), false),
      idle_(static_cast<size_t>(num_blocks), false),
      prev_(static_cast<size_t>(num_blocks), -1),
      next_(static_cast<size_t>(num_blocks), -1) {}

uint64_t PrefixCache::HashBlock(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = Mix(parent ^ 0x2545f4914f6cdd1dull);
  for (int32_t t : tokens) h = Mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 1));
  return h;
}

// Table 0 (the only one without layer groups) keys by the hash itself.
uint64_t PrefixCache::Key(int table, uint64_t hash) {
  return table == 0 ? hash : Mix(hash ^ (static_cast<uint64_t>(table) * 0x9e3779b97f4a7c15ull));
}

int32_t PrefixCache::Lookup(int table, uint64_t hash, uint64_t parent,
                            std::span<const int32_t> tokens) const {
  const auto it = map_.find(Key(table, hash));
  if (it == map_.end()) return -1;
  const int32_t b = it->second;
  const auto begin = tokens_.begin() + static_cast<ptrdiff_t>(b) * block_size_;
  if (table_[static_cast<size_t>(b)] != table || parent_[static_cast<size_t>(b)] != parent ||
      !std::equal(tokens.begin(), tokens.end(), begin, begin + block_size_)) {
    return -1;
  }
  return b;
}

bool PrefixCache::Insert(int table, int32_t block, uint64_t hash, uint64_t parent,
                         std::span<const int32_t> tokens) {
  const size_t b = static_cast<size_t>(block);
  const uint64_t key = Key(table, hash);
  if (cached_[b] || map_.count(key)) return false;
  map_.emplace(key, block);
  cached_[b] = true;
  key_[b] = key;
  parent_[b] = parent;
  table_[b] = table;
  std::copy(tokens.begin(), tokens.end(),
            tokens_.begin() + static_cast<ptrdiff_t>(b) * block_size_);
  return true;
}

void PrefixCache::MarkIdle(int32_t block) {
  const size_t b = static_cast<size_t>(block);
  if (idle_[b]) return;
  idle_[b] = true;
  prev_[b] = tail_;
  next_[b] = -1;
  if (tail_ >= 0) {
    next_[static_cast<size_t>(tail_)] = block;
  } else {
    head_ = block;
  }
  tail_ = block;
  ++num_idle_;
}

void PrefixCache::Unlink(int32_t block) {
  const size_t b = static_cast<size_t>(block);
  const int32_t p = prev_[b], n = next_[b];
  if (p >= 0) {
    next_[static_cast<size_t>(p)] = n;
  } else {
    head_ = n;
  }
  if (n >= 0) {
    prev_[static_cast<size_t>(n)] = p;
  } else {
    tail_ = p;
  }
  prev_[b] = next_[b] = -1;
  idle_[b] = false;
  --num_idle_;
}

void PrefixCache::MarkInUse(int32_t block) {
  if (idle_[static_cast<size_t>(block)]) Unlink(block);
}

int32_t PrefixCache::EvictLru() {
  const int32_t b = head_;
  if (b < 0) return -1;
  Unlink(b);
  map_.erase(key_[static_cast<size_t>(b)]);
  cached_[static_cast<size_t>(b)] = false;
  return b;
}

}  // namespace pinfer
