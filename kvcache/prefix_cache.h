// Prefix cache: full, computed blocks indexed by a hash of their tokens chained to their
// parent block's hash (so a hash names a whole prefix, as vLLM's block hashes do), and by the
// block table they belong to (a cache with layer groups has several tables per sequence, each
// holding the same positions of other layers: kv_layer_groups.h).
//
// Entries whose block no sequence references are "idle": they stay reusable until the free
// list runs dry, then the least recently used idle entry is evicted first. The cache keeps
// each entry's token ids and parent hash, so a 64-bit hash collision can never hand a
// sequence another prefix's K/V.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace pinfer {

class PrefixCache {
 public:
  static constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ull;  // parent hash of block 0

  PrefixCache(int32_t num_blocks, int block_size);

  static uint64_t HashBlock(uint64_t parent, std::span<const int32_t> tokens);

  // The block of table `table` holding (parent, tokens) with this hash, or -1.
  int32_t Lookup(int table, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) const;
  bool IsCached(int32_t block) const { return cached_[static_cast<size_t>(block)]; }
  int table_of(int32_t block) const { return table_[static_cast<size_t>(block)]; }

  // Registers a referenced block of table `table`. False (nothing changes) when another block
  // of that table already holds the hash or this block is already an entry.
  bool Insert(int table, int32_t block, uint64_t hash, uint64_t parent,
              std::span<const int32_t> tokens);

  // LRU list of idle entries (ref count 0): O(1) each.
  void MarkIdle(int32_t block);   // becomes the most recently used idle entry
  void MarkInUse(int32_t block);  // taken off the idle list (a prefix hit)
  int32_t num_idle() const { return num_idle_; }
  bool is_idle(int32_t block) const { return idle_[static_cast<size_t>(block)]; }
  // Removes the least recently used idle entry and returns its block (-1 when none).
  int32_t EvictLru();

 private:
  void Unlink(int32_t block);
  static uint64_t Key(int table, uint64_t hash);

  int block_size_;
  std::unordered_map<uint64_t, int32_t> map_;
  std::vector<uint64_t> key_, parent_;
  std::vector<int> table_;
  std::vector<int32_t> tokens_;  // block_size per block
  std::vector<bool> cached_, idle_;
  // Doubly linked idle list through prev_/next_; head_ is least recently used.
  std::vector<int32_t> prev_, next_;
  int32_t head_ = -1, tail_ = -1, num_idle_ = 0;
};

}  // namespace pinfer
