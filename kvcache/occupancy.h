// What the KV pool holds, exactly: computed from the block tables on demand (cheap: one pass
// over the live sequences).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pinfer {

struct SeqOccupancy {
  int64_t id = 0;
  int64_t tokens = 0;         // tokens stored
  int64_t slots = 0;          // slots its blocks hold (blocks x block size)
  int64_t blocks = 0;
  int64_t fragmentation = 0;  // slots - tokens
};

struct OccupancyReport {
  std::string dtype, layout;
  int block_size = 0;
  uint64_t bytes_per_token = 0;  // 2 x layers x row bytes of the format
  // used: referenced by a block table; cached: idle prefix-cache entries (no references,
  // reusable, evicted LRU-first; NumFreeBlocks counts them); free: on the free list.
  int64_t blocks_total = 0, blocks_used = 0, blocks_free = 0, blocks_cached = 0;
  int64_t tokens_stored = 0;     // distinct stored tokens (shared blocks count once)
  int64_t slots_allocated = 0;   // slots of used blocks
  int64_t fragmentation = 0;     // slots_allocated - tokens_stored
  uint64_t bytes_reserved = 0;   // whole pool
  uint64_t bytes_used = 0;       // tokens_stored x bytes_per_token
  std::vector<SeqOccupancy> seqs;

  double utilization() const {  // bytes holding tokens over bytes reserved
    return bytes_reserved ? (double)bytes_used / (double)bytes_reserved : 0.0;
  }
  std::string ToText() const;
  std::string ToJson() const;
};

}  // namespace pinfer
