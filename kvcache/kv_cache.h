// The KV cache: a pool of fixed-size blocks of token slots, handed to sequences on demand
// through per-sequence block tables (paged), or one max_model_len block per sequence reserved
// when it starts (contiguous, as a static cache does). Both layouts share this class, the
// storage layout and the attention code, so for a fixed KV format they give identical logits.
//
// Layer groups (kv_layer_groups.h): with sliding-window layers (paged layout), each group of
// layers with one window has block tables of its own, and a window table lets go of the
// blocks no query can read any more as the sequence advances (MarkComputed), so a window
// layer's memory stops growing at its window. Without windows there is one table per sequence
// whose blocks hold every layer.
//
// Storage of block b (block_bytes() bytes): [layer slot][k=0 | v=1][slot][row_bytes()]
// where a block holds layer_groups().layers_per_block layers (every layer without windows;
// layer l is at layer slot layer_groups().layer_slot[l]) and a row holds one token's
// kv_heads x head_dim values of one layer in the KV format.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvcache/kv_dtype.h"
#include "kvcache/kv_layer_groups.h"
#include "kvcache/occupancy.h"
#include "loaders/host_memory.h"

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
  // Per-layer sliding windows in tokens ([n_layers], 0: full attention; empty: every layer
  // full). Paged caches give window layers block tables of their own (kv_layer_groups.h).
  std::vector<int> layer_windows;
};

// Entries of a window table whose block was let go.
inline constexpr int32_t kNoBlock = -1;

// The layer groups and the bytes of one block under this config (the one rule for the cache
// and the engine's ledger): layers_per_block x 2 x KvBlockSlots(...) x KvRowBytes(dtype,
// kv_heads x head_dim). InvalidArgument when the format does not suit the row.
KvLayerGroups KvLayerGroupsFor(const KvCacheConfig& c);
absl::StatusOr<uint64_t> KvBlockBytes(const KvCacheConfig& c);
// The most blocks one sequence of `len` tokens holds at once under c (its layout, block size
// and windows, grouped for c.max_model_len), when a step appends at most max_chunk positions:
// KvLayerGroupsFor(c).MaxBlocksPerSequence(len, KvBlockSlots(...), min(max_chunk, len)). A
// window table counts at most WindowBlocksBound(window, block_size, chunk) blocks (decoding:
// ceil(window / block_size) + 1 when block_size divides the window). The one rule for the
// cache's own arithmetic and the engine's ledger.
int64_t KvSequenceBlocks(const KvCacheConfig& c, int64_t len, int64_t max_chunk);
// KvSequenceBlocks by layer group ([KvLayerGroupsFor(c).groups.size()]; they add up to it).
std::vector<int64_t> KvSequenceGroupBlocks(const KvCacheConfig& c, int64_t len, int64_t max_chunk);
// The longest max_model_len L <= limit for which one sequence's blocks fit in pool_bytes
// under c's format, layout, block size and windows, when a step appends at most max_chunk
// positions (at most L): the most L with
//   KvSequenceBlocks(c at L, L, max_chunk) x KvBlockBytes(c at L) <= pool_bytes.
// The groups change with L (a window joins the full group once L <= window), so each range of
// L between windows is searched on its own. 0 when not even one token fits; `limit` when a
// model whose every layer has a window fits at any length.
int64_t KvLongestSequence(KvCacheConfig c, uint64_t pool_bytes, int64_t max_chunk, int64_t limit);

// Where block bytes live. The CPU backend uses host memory; a device backend supplies its own
// (same layout) and the cache only does the accounting and asks it to copy blocks.
class KvStorage {
 public:
  virtual ~KvStorage() = default;
  virtual uint8_t* base() = 0;  // nullptr when not host-addressable
  virtual void CopyBlock(int32_t src, int32_t dst) = 0;
  // How the memory was had, for the start-up line ("committed in 0.42 s, transparent huge
  // pages"); empty when there is nothing to say.
  virtual std::string Describe() const { return ""; }
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
  // Host storage of num_blocks x block_bytes, every page committed when it is made (see
  // loaders/host_memory.h); what Create uses when given none (default options).
  // ResourceExhausted when the memory cannot be had.
  static absl::StatusOr<std::unique_ptr<KvStorage>> CommittedHostStorage(
      size_t block_bytes, int64_t num_blocks, CommittedMemory::Options options);

  ~KvCache();

  // Geometry.
  // The config as used: pool size resolved into num_blocks; contiguous has block_size =
  // max_model_len and prefix_caching off.
  const KvCacheConfig& config() const { return config_; }
  int block_size() const;  // slots per block (max_model_len when contiguous)
  int64_t num_blocks() const;
  size_t row_bytes() const;  // one token, one layer, keys or values
  size_t block_bytes() const;
  size_t bytes_per_token() const;  // 2 x layers x row_bytes (a token in every layer)
  const KvLayerGroups& layer_groups() const;
  int num_tables() const;  // block tables per sequence (1 without windows)

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
  // Blocks an Append of n more tokens would take from the pool, over all its tables
  // (copy-on-write included). For an id not (yet) added: the blocks a new sequence of n
  // tokens takes.
  int64_t BlocksNeeded(SeqId id, int n) const;
  // The most blocks beyond those it holds now that the sequence takes while it grows by n
  // tokens one step at a time, MarkComputed after each (decoding): full tables as
  // BlocksNeeded, window tables only what their window's peak adds (their blocks go as the
  // window moves). For admission headroom.
  int64_t BlocksToGrow(SeqId id, int n) const;
  int64_t NumFreeBlocks() const;  // free plus evictable cached blocks
  // Reserves slots for n more tokens after the sequence's current end. FailedPrecondition
  // past max_model_len, ResourceExhausted when the pool is out of blocks.
  absl::Status Append(SeqId id, int n);
  // The sequence's first computed.size() tokens (at most its slots) now hold K/V; `computed`
  // holds their ids, and no later query of the sequence comes before position
  // computed.size(). Their full blocks become prefix-cache entries (blocks offered before
  // are not hashed again), then window tables let go of the blocks that end before the
  // window of that position (to the prefix cache's idle entries when cached, else the free
  // list, unless another sequence shares them).
  void MarkComputed(SeqId id, std::span<const int32_t> computed);
  // The child shares all of the parent's blocks; a shared partly filled block is copied
  // when either side next appends into it.
  absl::Status Fork(SeqId parent, SeqId child);
  // Drops the sequence; its blocks return to the pool (cached ones stay evictable).
  void Free(SeqId id);
  int num_tokens(SeqId id) const;  // slots reserved (0 for an unknown id)
  // Block table `table` (0 .. num_tables() - 1) of the sequence: ceil(num_tokens / block
  // size) entries, kNoBlock where a window table let its block go. Empty for an unknown id.
  std::span<const int32_t> BlockTable(SeqId id, int table = 0) const;
  // The table of the sequence holding layer `layer`'s rows.
  std::span<const int32_t> LayerBlockTable(SeqId id, int layer) const;

  // Addressing (host storage only). Row: nullptr for kNoBlock or without host storage.
  uint8_t* Row(int32_t block, int layer, int kv, int slot);
  const uint8_t* Row(int32_t block, int layer, int kv, int slot) const;
  // The row of token `pos` of sequence `id` (nullptr where its window table let it go).
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
