// What the KV pool holds, exactly: computed from the block tables on demand (cheap: one pass
// over the live sequences).
//
// Slots and tokens: a block has block_size slots; a filled slot holds one token's K/V for the
// layers of its block. Without layer groups a block holds every layer, so a filled slot is a
// stored token. With groups (sliding windows: kv_layer_groups.h) a token has a slot in each
// table that still holds it, and the figures below count slots: tokens_stored is the filled
// slots, and bytes_used is tokens_stored x slot_bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pinfer {

struct SeqOccupancy {
  int64_t id = 0;
  int64_t tokens = 0;         // positions reserved (its length)
  int64_t slots = 0;          // slots its blocks hold (blocks x block size)
  int64_t blocks = 0;         // over all its tables
  int64_t fragmentation = 0;  // slots - filled slots (tokens, with one table)
};

// One layer group (kv_layer_groups.h): what its tables hold over all sequences.
struct GroupOccupancy {
  int window = 0;  // 0: full attention
  int layers = 0;
  int tables = 0;             // block tables per sequence
  int64_t blocks_used = 0;    // distinct blocks its tables reference
  int64_t tokens_stored = 0;  // filled slots of those blocks
};

struct OccupancyReport {
  std::string dtype, layout;
  int block_size = 0;
  uint64_t bytes_per_token = 0;  // 2 x layers x row bytes of the format (a token, every layer)
  uint64_t slot_bytes = 0;       // block bytes / block_size (bytes_per_token with one group)
  // used: referenced by a block table; cached: idle prefix-cache entries (no references,
  // reusable, evicted LRU-first; NumFreeBlocks counts them); free: on the free list.
  int64_t blocks_total = 0, blocks_used = 0, blocks_free = 0, blocks_cached = 0;
  int64_t tokens_stored = 0;           // filled slots (shared blocks count once)
  int64_t slots_allocated = 0;         // slots of used blocks
  int64_t fragmentation = 0;           // slots_allocated - tokens_stored
  uint64_t bytes_reserved = 0;         // whole pool
  uint64_t bytes_used = 0;             // tokens_stored x slot_bytes
  std::vector<GroupOccupancy> groups;  // one per layer group (one without sliding windows)
  std::vector<SeqOccupancy> seqs;

  double utilization() const {  // bytes holding tokens over bytes reserved
    return bytes_reserved ? (double)bytes_used / (double)bytes_reserved : 0.0;
  }
  std::string ToText() const;
  std::string ToJson() const;
};

}  // namespace pinfer
