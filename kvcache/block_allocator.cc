// Free list and reference counts of the KV pool.
#include "kvcache/block_allocator.h"

namespace pinfer {

BlockAllocator::BlockAllocator(int32_t num_blocks)
    : ref_(static_cast<size_t>(num_blocks), 0),
      on_free_list_(static_cast<size_t>(num_blocks), true) {
  free_.reserve(static_cast<size_t>(num_blocks));
  // Lowest block ids come off the stack first, which keeps small pools easy to read in tests.
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockAllocator::Allocate() {
  if (free_.empty()) return -1;
  const int32_t b = free_.back();
  free_.pop_back();
  on_free_list_[static_cast<size_t>(b)] = false;
  ref_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockAllocator::Adopt(int32_t b) { ref_[static_cast<size_t>(b)] = 1; }

void BlockAllocator::Release(int32_t b) {
  on_free_list_[static_cast<size_t>(b)] = true;
  free_.push_back(b);
}

}  // namespace pinfer
