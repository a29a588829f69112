// Internal state of KvCache, shared by kv_cache.cc (sequence operations), kv_cache_prefix.cc
// (prefix matching, hashing and sliding windows), kv_cache_check.cc (self-check) and
// occupancy.cc (reports). Not part of the public interface.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "kvcache/block_allocator.h"
#include "kvcache/kv_cache.h"
#include "kvcache/kv_layer_groups.h"
#include "kvcache/prefix_cache.h"

namespace pinfer {

class KvCache::Impl {
 public:
  // A sequence's slots. No token ids: the caller owns them and passes them in where the
  // prefix cache hashes blocks (MatchPrefix, MarkComputed).
  struct Seq {
    // [num_tables] block tables, each ceil(n_tokens / bs) entries covering positions from 0;
    // a window table's leading entries are kNoBlock, exactly
    // WindowFirstBlock(window, window_from, bs) of them (blocks no query can read any more).
    std::vector<std::vector<int32_t>> tables;
    int64_t n_tokens = 0;     // slots reserved, from position 0
    int64_t window_from = 0;  // no query comes before this position (MarkComputed, MatchPrefix)
    // The chained hash of each leading full block already offered to the prefix cache: a
    // memo derived from the ids MarkComputed was given, so the next call continues the chain.
    std::vector<uint64_t> hashes;
    int64_t table_len() const {
      return tables.empty() ? 0 : static_cast<int64_t>(tables[0].size());
    }
  };

  Impl(const KvCacheConfig& cfg, KvLayerGroups groups, int64_t num_blocks, size_t row_bytes,
       size_t block_bytes, std::unique_ptr<KvStorage> storage);

  // Pops a free block, or evicts the least recently used idle cached block (ref count 1).
  // Callers check NumFree() first.
  int32_t TakeBlock();
  // Drops one reference; at 0 the block becomes an idle cache entry or returns to the list.
  void DropBlock(int32_t b);
  int64_t NumFree() const { return alloc.num_free() + (prefix ? prefix->num_idle() : 0); }
  int64_t BlocksNeeded(const Seq* s, int n) const;
  // Lets each window table's blocks go that end before the window of position `next` (no
  // query comes before it any more); cached ones become idle prefix-cache entries.
  void Slide(Seq* s, int64_t next);
  const Seq* Find(SeqId id) const;
  Seq* Find(SeqId id);
  int window_of(int table) const { return groups.window_of_table(table); }

  KvCacheConfig cfg;  // normalised: contiguous has block_size = max_model_len, no prefix cache
  KvLayerGroups groups;
  int bs;
  int64_t num_blocks;
  size_t row_bytes, block_bytes;
  std::unique_ptr<KvStorage> storage;
  uint8_t* base;
  BlockAllocator alloc;
  std::optional<PrefixCache> prefix;
  std::map<SeqId, Seq> seqs;  // ordered, so reports list sequences by id
};

}  // namespace pinfer
