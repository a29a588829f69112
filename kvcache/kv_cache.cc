// KvCache: configuration checks, host storage, and per-sequence block tables (paged: grown one
// block at a time, one table per layer group table; contiguous: one max_model_len block taken
// at the first Append). Prefix matching, hashing and sliding windows: kv_cache_prefix.cc.
#include "kvcache/kv_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kvcache/kv_cache_impl.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

constexpr int kMinBlockSize = 8, kMaxBlockSize = 256;

// One 64-byte-aligned host allocation of num_blocks x block_bytes.
class HostKvStorage final : public KvStorage {
 public:
  HostKvStorage(std::unique_ptr<CommittedMemory> memory, size_t block_bytes)
      : memory_(std::move(memory)), block_bytes_(block_bytes) {}
  uint8_t* base() override { return memory_ ? memory_->data() : nullptr; }
  void CopyBlock(int32_t src, int32_t dst) override {
    std::memcpy(base() + static_cast<size_t>(dst) * block_bytes_,
                base() + static_cast<size_t>(src) * block_bytes_, block_bytes_);
  }
  std::string Describe() const override {
    if (!memory_) return "";
    return absl::StrCat("committed in ", absl::StrFormat("%.2f", memory_->commit_seconds()), " s",
                        memory_->huge_pages() ? ", transparent huge pages requested" : "",
                        memory_->locked() ? ", locked" : "");
  }

 private:
  std::unique_ptr<CommittedMemory> memory_;
  size_t block_bytes_;
};

int LayoutBlockSize(const KvCacheConfig& c) {
  return KvBlockSlots(c.layout, c.block_size, c.max_model_len);
}

size_t BlockBytesOf(const KvCacheConfig& c, const KvLayerGroups& g, size_t row_bytes) {
  return static_cast<size_t>(g.layers_per_block) * 2 * static_cast<size_t>(LayoutBlockSize(c)) *
         row_bytes;
}

}  // namespace

KvLayerGroups KvLayerGroupsFor(const KvCacheConfig& c) {
  return KvLayerGroups::Make(c.n_layers, c.layer_windows, c.layout, c.max_model_len);
}

absl::StatusOr<uint64_t> KvBlockBytes(const KvCacheConfig& c) {
  const auto row = KvRowBytes(c.dtype, static_cast<int64_t>(c.n_kv_heads) * c.head_dim);
  if (!row.ok()) return row.status();
  return BlockBytesOf(c, KvLayerGroupsFor(c), *row);
}

int64_t KvSequenceBlocks(const KvCacheConfig& c, int64_t len, int64_t max_chunk) {
  return KvLayerGroupsFor(c).MaxBlocksPerSequence(len, LayoutBlockSize(c),
                                                  std::min(max_chunk, len));
}

std::vector<int64_t> KvSequenceGroupBlocks(const KvCacheConfig& c, int64_t len, int64_t max_chunk) {
  const KvLayerGroups groups = KvLayerGroupsFor(c);
  std::vector<int64_t> blocks;
  for (size_t g = 0; g < groups.groups.size(); ++g) {
    blocks.push_back(groups.GroupMaxBlocks(g, len, LayoutBlockSize(c), std::min(max_chunk, len)));
  }
  return blocks;
}

namespace {

// Whether one sequence of L tokens fits in pool_bytes (c's max_model_len set to L).
bool SequenceFits(KvCacheConfig c, int64_t len, uint64_t pool_bytes, int64_t max_chunk) {
  c.max_model_len = static_cast<int>(len);
  const auto block = KvBlockBytes(c);
  if (!block.ok() || *block == 0) return false;
  return static_cast<uint64_t>(KvSequenceBlocks(c, len, max_chunk)) <= pool_bytes / *block;
}

}  // namespace

int64_t KvLongestSequence(KvCacheConfig c, uint64_t pool_bytes, int64_t max_chunk, int64_t limit) {
  limit = std::min<int64_t>(limit, std::numeric_limits<int>::max());
  // Ranges of L with the same groups: a window w joins its own group from L = w + 1 on.
  std::vector<int64_t> starts = {1};
  for (int w : c.layer_windows) {
    if (w > 0 && w < limit) starts.push_back(int64_t{w} + 1);
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  int64_t best = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t lo = starts[i], hi = i + 1 < starts.size() ? starts[i + 1] - 1 : limit;
    if (lo > hi || !SequenceFits(c, lo, pool_bytes, max_chunk)) continue;
    while (lo < hi) {  // the cost only grows with L within a range
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (SequenceFits(c, mid, pool_bytes, max_chunk)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    best = std::max(best, lo);
  }
  return best;
}

absl::StatusOr<KvLayout> ParseKvLayout(std::string_view name) {
  if (name == "paged") return KvLayout::kPaged;
  if (name == "contiguous") return KvLayout::kContiguous;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown KV cache layout '", Sv(name), "'; choose paged or contiguous"));
}

std::string_view KvLayoutName(KvLayout l) {
  return l == KvLayout::kContiguous ? "contiguous" : "paged";
}

int KvBlockSlots(KvLayout layout, int block_size, int max_model_len) {
  return layout == KvLayout::kContiguous ? max_model_len : block_size;
}

// ---- Impl -------------------------------------------------------------------------------

KvCache::Impl::Impl(const KvCacheConfig& c, KvLayerGroups g, int64_t n, size_t row, size_t block,
                    std::unique_ptr<KvStorage> st)
    : cfg(c),
      groups(std::move(g)),
      bs(c.block_size),
      num_blocks(n),
      row_bytes(row),
      block_bytes(block),
      storage(std::move(st)),
      base(storage->base()),
      alloc(static_cast<int32_t>(n)) {
  if (cfg.prefix_caching) prefix.emplace(static_cast<int32_t>(n), bs);
}

int32_t KvCache::Impl::TakeBlock() {
  int32_t b = alloc.Allocate();
  if (b < 0 && prefix) {
    b = prefix->EvictLru();
    if (b >= 0) alloc.Adopt(b);
  }
  return b;
}

void KvCache::Impl::DropBlock(int32_t b) {
  if (alloc.Unref(b) > 0) return;
  if (prefix && prefix->IsCached(b)) {
    prefix->MarkIdle(b);
  } else {
    alloc.Release(b);
  }
}

int64_t KvCache::Impl::BlocksNeeded(const Seq* s, int n) const {
  if (n <= 0) return 0;
  const int64_t cur = s ? s->n_tokens : 0;
  const int64_t have = s ? s->table_len() : 0;
  const int64_t want = (cur + n + bs - 1) / bs;
  int64_t need = std::max<int64_t>(0, want - have) * groups.num_tables();
  // Appending into a partly filled block that another sequence shares copies it first.
  if (s && cur % bs != 0 && have > 0) {
    for (const std::vector<int32_t>& table : s->tables) need += alloc.ref_count(table.back()) > 1;
  }
  return need;
}

const KvCache::Impl::Seq* KvCache::Impl::Find(SeqId id) const {
  const auto it = seqs.find(id);
  return it == seqs.end() ? nullptr : &it->second;
}

KvCache::Impl::Seq* KvCache::Impl::Find(SeqId id) {
  const auto it = seqs.find(id);
  return it == seqs.end() ? nullptr : &it->second;
}

// ---- Creation -----------------------------------------------------------------------------

namespace {
class AccountingOnlyStorage final : public KvStorage {
 public:
  uint8_t* base() override { return nullptr; }
  void CopyBlock(int32_t, int32_t) override {}
};
}  // namespace

std::unique_ptr<KvStorage> KvCache::NoStorage() {
  return std::make_unique<AccountingOnlyStorage>();
}

absl::StatusOr<std::unique_ptr<KvStorage>> KvCache::CommittedHostStorage(
    size_t block_bytes, int64_t num_blocks, CommittedMemory::Options options) {
  const uint64_t blocks = static_cast<uint64_t>(std::max<int64_t>(0, num_blocks));
  if (block_bytes > 0 && blocks > std::numeric_limits<size_t>::max() / block_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("KV pool of ", blocks, " blocks is too large"));
  }
  auto memory = CommittedMemory::Allocate(block_bytes * blocks, options, "the KV pool");
  if (!memory.ok()) return memory.status();
  return std::unique_ptr<KvStorage>(new HostKvStorage(*std::move(memory), block_bytes));
}

namespace {

// The shape, limits, windows and (paged) block size of a config: InvalidArgument naming the
// value and what to give instead.
absl::Status CheckShape(const KvCacheConfig& c) {
  if (c.n_layers <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV cache shape must be positive: n_layers ", c.n_layers, ", n_kv_heads ", c.n_kv_heads,
        ", head_dim ", c.head_dim, "; take them from the model's config"));
  }
  if (c.max_model_len <= 0 || c.max_num_seqs <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_model_len (", c.max_model_len,
                                                   ") and max_num_seqs (", c.max_num_seqs,
                                                   ") must be at least 1"));
  }
  if (!c.layer_windows.empty() && static_cast<int>(c.layer_windows.size()) != c.n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("layer_windows has ", c.layer_windows.size(),
                                                   " entries for ", c.n_layers,
                                                   " layers; give one per layer, or none"));
  }
  for (size_t l = 0; l < c.layer_windows.size(); ++l) {
    if (c.layer_windows[l] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", l, "'s sliding window is ", c.layer_windows[l], "; give 0 (none) or more"));
    }
  }
  if (c.layout == KvLayout::kPaged) {
    if (c.block_size < kMinBlockSize || c.block_size > kMaxBlockSize) {
      return absl::InvalidArgumentError(absl::StrCat("KV block size ", c.block_size,
                                                     " is out of range; choose ", kMinBlockSize,
                                                     "..", kMaxBlockSize, " (16 is usual)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheConfig& config,
                                                         std::unique_ptr<KvStorage> storage) {
  if (absl::Status s = CheckShape(config); !s.ok()) return s;
  KvCacheConfig c = config;
  const auto row = KvRowBytes(c.dtype, static_cast<int64_t>(c.n_kv_heads) * c.head_dim);
  if (!row.ok()) return row.status();
  if (c.layout == KvLayout::kContiguous) {
    c.block_size = LayoutBlockSize(c);  // one block holds a whole sequence
    c.prefix_caching = false;
  }
  KvLayerGroups groups = KvLayerGroupsFor(c);
  const size_t block_bytes = BlockBytesOf(c, groups, *row);
  const uint64_t per_token = 2ull * static_cast<uint64_t>(c.n_layers) * *row;
  int64_t n = c.num_blocks;
  if (n < 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_blocks ", n, " is negative"));
  }
  if (n == 0) {
    if (c.pool_bytes == 0) {
      return absl::InvalidArgumentError(
          "KV pool size not set: give num_blocks or pool_bytes (e.g. --kv-cache-memory)");
    }
    n = static_cast<int64_t>(c.pool_bytes / block_bytes);
    if (n < 1) {
      std::string hint =
          c.layout == KvLayout::kContiguous
              ? absl::StrCat("; the longest max_model_len that fits is ", c.pool_bytes / per_token)
              : std::string();
      return absl::InvalidArgumentError(absl::StrCat(
          "KV pool of ", c.pool_bytes, " bytes is smaller than one block: a block of ",
          LayoutBlockSize(c), " tokens and ", groups.layers_per_block, " layers needs ",
          block_bytes, " bytes (", per_token, " bytes per token in all ", c.n_layers, " layers at ",
          Sv(KvDtypeName(c.dtype)), "); give at least ", block_bytes, " bytes", hint));
    }
  }
  if (n > std::numeric_limits<int32_t>::max() ||
      static_cast<uint64_t>(n) > std::numeric_limits<uint64_t>::max() / block_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("KV pool of ", n, " blocks is too large"));
  }
  c.num_blocks = n;
  if (!storage) {
    auto host = CommittedHostStorage(block_bytes, n, {});
    if (!host.ok()) return host.status();
    storage = *std::move(host);
  }
  auto impl =
      std::make_unique<Impl>(c, std::move(groups), n, *row, block_bytes, std::move(storage));
  return std::unique_ptr<KvCache>(new KvCache(c, std::move(impl)));
}

KvCache::KvCache(KvCacheConfig config, std::unique_ptr<Impl> impl)
    : config_(std::move(config)), impl_(std::move(impl)) {}

KvCache::~KvCache() = default;

int KvCache::block_size() const { return impl_->bs; }
int64_t KvCache::num_blocks() const { return impl_->num_blocks; }
size_t KvCache::row_bytes() const { return impl_->row_bytes; }
size_t KvCache::block_bytes() const { return impl_->block_bytes; }
size_t KvCache::bytes_per_token() const {
  return 2 * static_cast<size_t>(config_.n_layers) * impl_->row_bytes;
}
const KvLayerGroups& KvCache::layer_groups() const { return impl_->groups; }
int KvCache::num_tables() const { return impl_->groups.num_tables(); }

// ---- Sequences ----------------------------------------------------------------------------

absl::Status KvCache::AddSequence(SeqId id) {
  if (impl_->Find(id)) {
    return absl::AlreadyExistsError(absl::StrCat("sequence ", id, " already exists"));
  }
  if (static_cast<int64_t>(impl_->seqs.size()) >= config_.max_num_seqs) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot add sequence ", id, ": ", impl_->seqs.size(),
                     " sequences are live, max_num_seqs is ", config_.max_num_seqs,
                     "; wait for one to finish (or raise max_num_seqs)"));
  }
  Impl::Seq seq;
  seq.tables.resize(static_cast<size_t>(impl_->groups.num_tables()));
  impl_->seqs.emplace(id, std::move(seq));
  return absl::OkStatus();
}

bool KvCache::HasSequence(SeqId id) const { return impl_->Find(id) != nullptr; }

int64_t KvCache::BlocksNeeded(SeqId id, int n) const {
  return impl_->BlocksNeeded(impl_->Find(id), n);
}

int64_t KvCache::BlocksToGrow(SeqId id, int n) const {
  const Impl& m = *impl_;
  const Impl::Seq* s = m.Find(id);
  if (n <= 0) return 0;
  const int64_t cur = s ? s->n_tokens : 0;
  const int64_t have = s ? s->table_len() : 0;
  int64_t need = 0;
  for (int t = 0; t < m.groups.num_tables(); ++t) {
    const int w = m.window_of(t);
    const int64_t first = s ? WindowFirstBlock(w, s->window_from, m.bs) : 0;
    // Blocks the table holds while position p is appended, the window of p held: their count
    // rises within each block's worth of positions, so the peak is in the last bs of them.
    int64_t peak = 0;
    for (int64_t p = std::max(cur, cur + n - m.bs); p < cur + n; ++p) {
      peak = std::max(peak, p / m.bs + 1 - std::max(first, WindowFirstBlock(w, p, m.bs)));
    }
    need += std::max<int64_t>(0, peak - (have - first));
    if (s && cur % m.bs != 0 && have > 0) need += m.alloc.ref_count(s->tables[t].back()) > 1;
  }
  return need;
}

int64_t KvCache::NumFreeBlocks() const { return impl_->NumFree(); }

absl::Status KvCache::Append(SeqId id, int n) {
  Impl& m = *impl_;
  Impl::Seq* s = m.Find(id);
  if (!s) return absl::NotFoundError(absl::StrCat("no sequence ", id, "; AddSequence it first"));
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot append ", n, " slots to sequence ", id, ": give 0 or more"));
  }
  if (n == 0) return absl::OkStatus();
  const int64_t cur = s->n_tokens;
  const int64_t total = cur + n;
  if (total > config_.max_model_len) {
    return absl::FailedPreconditionError(
        absl::StrCat("sequence ", id, " would grow to ", total, " tokens, past max_model_len ",
                     config_.max_model_len, "; stop it or raise max_model_len"));
  }
  const int64_t need = m.BlocksNeeded(s, n);
  if (need > m.NumFree()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sequence ", id, " needs ", need, " more KV block(s) for ", n,
                     " token(s) but only ", m.NumFree(), " of ", m.num_blocks, " blocks (", m.bs,
                     " tokens each) are free; free or preempt a sequence, or enlarge the KV pool"));
  }
  for (std::vector<int32_t>& table : s->tables) {
    // A partly filled last block is never let go (it holds the next position's slot).
    if (cur % m.bs != 0 && !table.empty() && m.alloc.ref_count(table.back()) > 1) {
      const int32_t old = table.back();
      const int32_t copy = m.TakeBlock();
      m.storage->CopyBlock(old, copy);
      m.DropBlock(old);
      table.back() = copy;
    }
    while (static_cast<int64_t>(table.size()) * m.bs < total) table.push_back(m.TakeBlock());
  }
  s->n_tokens = total;
  return absl::OkStatus();
}

absl::Status KvCache::Fork(SeqId parent, SeqId child) {
  Impl& m = *impl_;
  const Impl::Seq* p = m.Find(parent);
  if (!p) return absl::NotFoundError(absl::StrCat("cannot fork: no sequence ", parent));
  if (m.Find(child)) {
    return absl::AlreadyExistsError(
        absl::StrCat("cannot fork ", parent, " into ", child, ": sequence ", child, " exists"));
  }
  if (static_cast<int64_t>(m.seqs.size()) >= config_.max_num_seqs) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot fork ", parent, " into ", child, ": ", m.seqs.size(),
                     " sequences are live, max_num_seqs is ", config_.max_num_seqs));
  }
  Impl::Seq copy = *p;
  for (const std::vector<int32_t>& table : copy.tables) {
    for (int32_t b : table) {
      if (b != kNoBlock) m.alloc.Ref(b);
    }
  }
  m.seqs.emplace(child, std::move(copy));
  return absl::OkStatus();
}

void KvCache::Free(SeqId id) {
  Impl& m = *impl_;
  const auto it = m.seqs.find(id);
  if (it == m.seqs.end()) return;
  // Tail blocks first: they become the least recently used idle entries, so a cached prefix
  // loses its end before its beginning; a position's blocks in every table go together.
  const Impl::Seq& s = it->second;
  for (int64_t k = s.table_len() - 1; k >= 0; --k) {
    for (const std::vector<int32_t>& table : s.tables) {
      if (table[static_cast<size_t>(k)] != kNoBlock) m.DropBlock(table[static_cast<size_t>(k)]);
    }
  }
  m.seqs.erase(it);
}

int KvCache::num_tokens(SeqId id) const {
  const Impl::Seq* s = impl_->Find(id);
  return s ? static_cast<int>(s->n_tokens) : 0;
}

std::span<const int32_t> KvCache::BlockTable(SeqId id, int table) const {
  const Impl::Seq* s = impl_->Find(id);
  if (!s || table < 0 || table >= static_cast<int>(s->tables.size())) return {};
  return s->tables[static_cast<size_t>(table)];
}

std::span<const int32_t> KvCache::LayerBlockTable(SeqId id, int layer) const {
  if (layer < 0 || layer >= impl_->groups.n_layers) return {};
  return BlockTable(id, impl_->groups.layer_table[static_cast<size_t>(layer)]);
}

int32_t KvCache::ref_count(int32_t block) const {
  return block >= 0 && block < impl_->num_blocks ? impl_->alloc.ref_count(block) : 0;
}

// ---- Addressing ---------------------------------------------------------------------------

const uint8_t* KvCache::Row(int32_t block, int layer, int kv, int slot) const {
  const Impl& m = *impl_;
  if (!m.base || block < 0 || block >= m.num_blocks || layer < 0 || layer >= m.groups.n_layers) {
    return nullptr;
  }
  const size_t layer_slot = static_cast<size_t>(m.groups.layer_slot[static_cast<size_t>(layer)]);
  const size_t index = (layer_slot * 2 + static_cast<size_t>(kv)) * static_cast<size_t>(m.bs) +
                       static_cast<size_t>(slot);
  return m.base + static_cast<size_t>(block) * m.block_bytes + index * m.row_bytes;
}

uint8_t* KvCache::Row(int32_t block, int layer, int kv, int slot) {
  return const_cast<uint8_t*>(std::as_const(*this).Row(block, layer, kv, slot));
}

const uint8_t* KvCache::TokenRow(SeqId id, int pos, int layer, int kv) const {
  const std::span<const int32_t> table = LayerBlockTable(id, layer);
  const int bs = impl_->bs;
  if (pos < 0 || static_cast<size_t>(pos / bs) >= table.size()) return nullptr;
  return Row(table[static_cast<size_t>(pos / bs)], layer, kv, pos % bs);
}

uint8_t* KvCache::TokenRow(SeqId id, int pos, int layer, int kv) {
  return const_cast<uint8_t*>(std::as_const(*this).TokenRow(id, pos, layer, kv));
}

}  // namespace pinfer
