// Internal state of KvCache, shared by kv_cache.cc (sequence operations) and occupancy.cc
// (reports). Not part of the public interface.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "kvcache/block_allocator.h"
#include "kvcache/kv_cache.h"
#include "kvcache/prefix_cache.h"

namespace pinfer {

class KvCache::Impl {
 public:
  // A sequence's slots. No token ids: the caller owns them and passes them in where the
  // prefix cache hashes blocks (MatchPrefix, MarkComputed).
  struct Seq {
    std::vector<int32_t> blocks;  // block table
    int64_t n_tokens = 0;         // slots reserved, from position 0
    // The chained hash of each leading full block already offered to the prefix cache: a
    // memo derived from the ids MarkComputed was given, so the next call continues the chain.
    std::vector<uint64_t> hashes;
  };

  Impl(const KvCacheConfig& cfg, int64_t num_blocks, size_t row_bytes,
       std::unique_ptr<KvStorage> storage);

  // Pops a free block, or evicts the least recently used idle cached block (ref count 1).
  // Callers check NumFree() first.
  int32_t TakeBlock();
  // Drops one reference; at 0 the block becomes an idle cache entry or returns to the list.
  void DropBlock(int32_t b);
  int64_t NumFree() const { return alloc.num_free() + (prefix ? prefix->num_idle() : 0); }
  int64_t BlocksNeeded(const Seq* s, int n) const;
  const Seq* Find(SeqId id) const;
  Seq* Find(SeqId id);

  KvCacheConfig cfg;  // normalised: contiguous has block_size = max_model_len, no prefix cache
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
