// The pool's free list and reference counts: O(1) allocate, reference, release.
//
// A block is in exactly one of three states: free (on the free list), referenced (ref > 0: in
// one or more block tables), or idle (ref 0 but kept off the free list by its owner, the prefix
// cache, until evicted). The allocator tracks free and referenced; the cache tracks idle ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pinfer {

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  bool is_free(int32_t b) const { return on_free_list_[static_cast<size_t>(b)]; }
  int32_t ref_count(int32_t b) const { return ref_[static_cast<size_t>(b)]; }

  // Pops a free block with ref count 1; -1 when the free list is empty.
  int32_t Allocate();
  // Takes a block that is not on the free list (an idle cached block) with ref count 1.
  void Adopt(int32_t b);
  void Ref(int32_t b) { ++ref_[static_cast<size_t>(b)]; }
  // Drops one reference; returns the count left. The caller decides where a block at 0 goes.
  int32_t Unref(int32_t b) { return --ref_[static_cast<size_t>(b)]; }
  // Puts a block with ref count 0 back on the free list.
  void Release(int32_t b);

 private:
  std::vector<int32_t> ref_;
  std::vector<int32_t> free_;  // stack: the most recently released block is reused first
  std::vector<bool> on_free_list_;
};

}  // namespace pinfer
