// The KV cache: a pool of fixed-size blocks of token slots, handed to sequences on demand
// through per-sequence block tables (paged), or one max_model_len block per sequence reserved
// when it starts (contiguous, as a static cache does). Both layouts share this class, the
// storage layout and the attention code, so for a fixed KV format they give identical logits.
//
// Storage of block b (block_bytes() bytes): [layer][k=0 | v=1][slot][row_bytes()]
// where a row holds one token's kv_heads x head_dim values of one layer in the KV format.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvcache/kv_dtype.h"
#include "kvcache/occupancy.h"

namespace pinfer {

using SeqId = int64_t;

enum class KvLayout { kPaged, kContiguous };
absl::StatusOr<KvLayout> ParseKvLayout(std::string_view name);  // "paged" | "contiguous"
std::string_view KvLayoutName(KvLayout l);
// Token slots per block: block_size when paged; the contiguous layout's one block per
// sequence holds max_model_len. The one rule for both the cache and the engine's ledger.
int KvBlockSlots(KvLayout layout, int block_size, int max_model_len);

struct KvCacheConfig {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  KvDtype dtype = KvDtype::kF16;
  KvLayout layout = KvLayout::kPaged;
  int block_size = 16;       // token slots per block, 8..256 (paged; contiguous uses max_model_len)
  int max_model_len = 2048;  // longest sequence, prompt and output together
  int max_num_seqs = 256;    // live sequences at once
  int64_t num_blocks = 0;    // pool size in blocks, or (when 0)
  uint64_t pool_bytes = 0;   // pool size in bytes, rounded down to whole blocks
  bool prefix_caching = true;  // paged only
};

// Where block bytes live. The CPU backend uses host memory; a device backend supplies its own
// (same layout) and the cache only does the accounting and asks it to copy blocks.
class KvStorage {
 public:
  virtual ~KvStorage() = default;
  virtual uint8_t* base() = 0;  // nullptr when not host-addressable
  virtual void CopyBlock(int32_t src, int32_t dst) = 0;
};

class KvCache {
 public:
  // Validates the config (clear errors: block size range, formats that do not fit the row,
  // a pool smaller than one block). storage == nullptr: allocate host memory for the pool.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(
      const KvCacheConfig& config, std::unique_ptr<KvStorage> storage = nullptr);
  // Storage with no memory behind it: accounting only (planning and benchmarks of
  // 7B-sized pools; rows must not be addressed).
  static std::unique_ptr<KvStorage> NoStorage();
  // Host storage of num_blocks x block_bytes (what Create uses when given none).
  static std::unique_ptr<KvStorage> HostStorage(const KvCacheConfig& config, int64_t num_blocks);

  ~KvCache();

  // Geometry.
  // The config as used: pool size resolved into num_blocks; contiguous has block_size =
  // max_model_len and prefix_caching off.
  const KvCacheConfig& config() const { return config_; }
  int block_size() const;  // slots per block (max_model_len when contiguous)
  int64_t num_blocks() const;
  size_t row_bytes() const;  // one token, one layer, keys or values
  size_t block_bytes() const;
  size_t bytes_per_token() const;  // 2 x layers x row_bytes

  // Sequences. Every error leaves the cache as it was.
  absl::Status AddSequence(SeqId id);  // AlreadyExists, or ResourceExhausted past max_num_seqs
  bool HasSequence(SeqId id) const;
  // The cache keeps no token ids: the caller owns a sequence's ids and passes them in where
  // blocks are hashed (MatchPrefix, MarkComputed); the cache keeps slots and block hashes.
  //
  // Before the first Append: take the cached full blocks that begin `prompt` (the sequence's
  // ids); returns the tokens they cover (a multiple of the block size, leaving at least one
  // prompt token to compute), which become the sequence's first slots. 0 when prefix caching
  // is off or nothing matches.
  int MatchPrefix(SeqId id, std::span<const int32_t> prompt);
  // Blocks an Append of n more tokens would take from the pool (copy-on-write included).
  // For an id not (yet) added: the blocks a new sequence of n tokens takes.
  int64_t BlocksNeeded(SeqId id, int n) const;
  int64_t NumFreeBlocks() const;  // free plus evictable cached blocks
  // Reserves slots for n more tokens after the sequence's current end. FailedPrecondition
  // past max_model_len, ResourceExhausted when the pool is out of blocks.
  absl::Status Append(SeqId id, int n);
  // The sequence's first computed.size() tokens (at most its slots) now hold K/V; `computed`
  // holds their ids. Their full blocks become prefix-cache entries (blocks offered before
  // are not hashed again).
  void MarkComputed(SeqId id, std::span<const int32_t> computed);
  // The child shares all of the parent's blocks; a shared partly filled block is copied
  // when either side next appends into it.
  absl::Status Fork(SeqId parent, SeqId child);
  // Drops the sequence; its blocks return to the pool (cached ones stay evictable).
  void Free(SeqId id);
  int num_tokens(SeqId id) const;  // slots reserved (0 for an unknown id)
  std::span<const int32_t> BlockTable(SeqId id) const;

  // Addressing (host storage only).
  uint8_t* Row(int32_t block, int layer, int kv, int slot);
  const uint8_t* Row(int32_t block, int layer, int kv, int slot) const;
  // The row of token `pos` of sequence `id`.
  uint8_t* TokenRow(SeqId id, int pos, int layer, int kv);
  const uint8_t* TokenRow(SeqId id, int pos, int layer, int kv) const;

  OccupancyReport Report() const;

  // Diagnostics (tests, debugging): references held on a block (0 for free or idle cached
  // blocks); and a full consistency check of ref counts, free list and prefix cache.
  int32_t ref_count(int32_t block) const;
  absl::Status CheckInvariants() const;

  class Impl;

 private:
  KvCache(KvCacheConfig config, std::unique_ptr<Impl> impl);
  KvCacheConfig config_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pinfer
