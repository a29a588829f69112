// KvCache: configuration checks, host storage, and per-sequence block tables (paged: grown one
// block at a time; contiguous: one max_model_len block taken at the first Append).
#include "kvcache/kv_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kvcache/kv_cache_impl.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

constexpr int kMinBlockSize = 8, kMaxBlockSize = 256;
constexpr size_t kHostAlign = 64;

// One 64-byte-aligned host allocation of num_blocks x block_bytes.
class HostKvStorage final : public KvStorage {
 public:
  HostKvStorage(size_t block_bytes, int64_t num_blocks) : block_bytes_(block_bytes) {
    const size_t bytes = block_bytes * static_cast<size_t>(num_blocks);
    const size_t rounded = (bytes + kHostAlign - 1) / kHostAlign * kHostAlign;
    if (rounded > 0) data_ = static_cast<uint8_t*>(std::aligned_alloc(kHostAlign, rounded));
  }
  ~HostKvStorage() override { std::free(data_); }
  uint8_t* base() override { return data_; }
  void CopyBlock(int32_t src, int32_t dst) override {
    std::memcpy(data_ + static_cast<size_t>(dst) * block_bytes_,
                data_ + static_cast<size_t>(src) * block_bytes_, block_bytes_);
  }

 private:
  size_t block_bytes_;
  uint8_t* data_ = nullptr;
};

int LayoutBlockSize(const KvCacheConfig& c) {
  return KvBlockSlots(c.layout, c.block_size, c.max_model_len);
}

size_t BlockBytesOf(const KvCacheConfig& c, size_t row_bytes) {
  return static_cast<size_t>(c.n_layers) * 2 * static_cast<size_t>(LayoutBlockSize(c)) * row_bytes;
}

}  // namespace

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

KvCache::Impl::Impl(const KvCacheConfig& c, int64_t n, size_t row, std::unique_ptr<KvStorage> st)
    : cfg(c),
      bs(c.block_size),
      num_blocks(n),
      row_bytes(row),
      block_bytes(BlockBytesOf(c, row)),
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
  const int64_t have = s ? static_cast<int64_t>(s->blocks.size()) : 0;
  const int64_t want = (cur + n + bs - 1) / bs;
  int64_t need = std::max<int64_t>(0, want - have);
  // Appending into a partly filled block that another sequence shares copies it first.
  if (s && cur % bs != 0 && have > 0 && alloc.ref_count(s->blocks.back()) > 1) ++need;
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

std::unique_ptr<KvStorage> KvCache::HostStorage(const KvCacheConfig& config, int64_t num_blocks) {
  const auto row =
      KvRowBytes(config.dtype, static_cast<int64_t>(config.n_kv_heads) * config.head_dim);
  return std::make_unique<HostKvStorage>(row.ok() ? BlockBytesOf(config, *row) : 0,
                                         std::max<int64_t>(0, num_blocks));
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheConfig& config,
                                                         std::unique_ptr<KvStorage> storage) {
  KvCacheConfig c = config;
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
  const auto row = KvRowBytes(c.dtype, static_cast<int64_t>(c.n_kv_heads) * c.head_dim);
  if (!row.ok()) return row.status();
  if (c.layout == KvLayout::kPaged) {
    if (c.block_size < kMinBlockSize || c.block_size > kMaxBlockSize) {
      return absl::InvalidArgumentError(absl::StrCat("KV block size ", c.block_size,
                                                     " is out of range; choose ", kMinBlockSize,
                                                     "..", kMaxBlockSize, " (16 is usual)"));
    }
  } else {
    c.block_size = LayoutBlockSize(c);  // one block holds a whole sequence
    c.prefix_caching = false;
  }
  const size_t block_bytes = BlockBytesOf(c, *row);
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
      return absl::InvalidArgumentError(
          absl::StrCat("KV pool of ", c.pool_bytes, " bytes is smaller than one block: a block of ",
                       LayoutBlockSize(c), " tokens needs ", block_bytes, " bytes (", per_token,
                       " bytes per token at ", Sv(KvDtypeName(c.dtype)), "); give at least ",
                       block_bytes, " bytes", hint));
    }
  }
  if (n > std::numeric_limits<int32_t>::max() ||
      static_cast<uint64_t>(n) > std::numeric_limits<uint64_t>::max() / block_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("KV pool of ", n, " blocks is too large"));
  }
  c.num_blocks = n;
  if (!storage) {
    storage = HostStorage(c, n);
    if (storage->base() == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("could not allocate ", static_cast<uint64_t>(n) * block_bytes,
                       " bytes of host memory for the KV pool (", n, " blocks of ", block_bytes,
                       " bytes); lower num_blocks or pool_bytes"));
    }
  }
  auto impl = std::make_unique<Impl>(c, n, *row, std::move(storage));
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
  impl_->seqs.emplace(id, Impl::Seq{});
  return absl::OkStatus();
}

bool KvCache::HasSequence(SeqId id) const { return impl_->Find(id) != nullptr; }

int KvCache::MatchPrefix(SeqId id, std::span<const int32_t> prompt) {
  Impl& m = *impl_;
  Impl::Seq* s = m.Find(id);
  if (!m.prefix || !s || s->n_tokens != 0 || prompt.empty()) return 0;
  const int64_t limit =
      std::min<int64_t>(static_cast<int64_t>(prompt.size()) - 1, config_.max_model_len) / m.bs;
  uint64_t parent = PrefixCache::kRootHash;
  for (int64_t k = 0; k < limit; ++k) {
    const auto chunk = prompt.subspan(static_cast<size_t>(k * m.bs), static_cast<size_t>(m.bs));
    const uint64_t h = PrefixCache::HashBlock(parent, chunk);
    const int32_t b = m.prefix->Lookup(h, parent, chunk);
    if (b < 0) break;
    if (m.alloc.ref_count(b) == 0) {
      m.prefix->MarkInUse(b);
      m.alloc.Adopt(b);
    } else {
      m.alloc.Ref(b);
    }
    s->blocks.push_back(b);
    s->hashes.push_back(h);
    s->n_tokens += m.bs;
    parent = h;
  }
  return static_cast<int>(s->n_tokens);
}

int64_t KvCache::BlocksNeeded(SeqId id, int n) const {
  return impl_->BlocksNeeded(impl_->Find(id), n);
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
  if (cur % m.bs != 0 && !s->blocks.empty() && m.alloc.ref_count(s->blocks.back()) > 1) {
    const int32_t old = s->blocks.back();
    const int32_t copy = m.TakeBlock();
    m.storage->CopyBlock(old, copy);
    m.DropBlock(old);
    s->blocks.back() = copy;
  }
  while (static_cast<int64_t>(s->blocks.size()) * m.bs < total) s->blocks.push_back(m.TakeBlock());
  s->n_tokens = total;
  return absl::OkStatus();
}

void KvCache::MarkComputed(SeqId id, std::span<const int32_t> computed) {
  Impl& m = *impl_;
  Impl::Seq* s = m.Find(id);
  if (!m.prefix || !s) return;
  const int64_t full = std::min<int64_t>(static_cast<int64_t>(computed.size()), s->n_tokens) / m.bs;
  for (int64_t k = static_cast<int64_t>(s->hashes.size()); k < full; ++k) {
    const uint64_t parent = k == 0 ? PrefixCache::kRootHash : s->hashes[static_cast<size_t>(k - 1)];
    const auto chunk = computed.subspan(static_cast<size_t>(k * m.bs), static_cast<size_t>(m.bs));
    const uint64_t h = PrefixCache::HashBlock(parent, chunk);
    m.prefix->Insert(s->blocks[static_cast<size_t>(k)], h, parent, chunk);  // no-op if present
    s->hashes.push_back(h);
  }
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
  for (int32_t b : copy.blocks) m.alloc.Ref(b);
  m.seqs.emplace(child, std::move(copy));
  return absl::OkStatus();
}

void KvCache::Free(SeqId id) {
  Impl& m = *impl_;
  const auto it = m.seqs.find(id);
  if (it == m.seqs.end()) return;
  // Tail blocks first: they become the least recently used idle entries, so a cached prefix
  // loses its end before its beginning.
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) m.DropBlock(*b);
  m.seqs.erase(it);
}

int KvCache::num_tokens(SeqId id) const {
  const Impl::Seq* s = impl_->Find(id);
  return s ? static_cast<int>(s->n_tokens) : 0;
}

std::span<const int32_t> KvCache::BlockTable(SeqId id) const {
  const Impl::Seq* s = impl_->Find(id);
  return s ? std::span<const int32_t>(s->blocks) : std::span<const int32_t>();
}

int32_t KvCache::ref_count(int32_t block) const {
  return block >= 0 && block < impl_->num_blocks ? impl_->alloc.ref_count(block) : 0;
}

// ---- Addressing ---------------------------------------------------------------------------

const uint8_t* KvCache::Row(int32_t block, int layer, int kv, int slot) const {
  const Impl& m = *impl_;
  if (!m.base || block < 0 || block >= m.num_blocks) return nullptr;
  const size_t index =
      (static_cast<size_t>(layer) * 2 + static_cast<size_t>(kv)) * static_cast<size_t>(m.bs) +
      static_cast<size_t>(slot);
  return m.base + static_cast<size_t>(block) * m.block_bytes + index * m.row_bytes;
}

uint8_t* KvCache::Row(int32_t block, int layer, int kv, int slot) {
  return const_cast<uint8_t*>(std::as_const(*this).Row(block, layer, kv, slot));
}

const uint8_t* KvCache::TokenRow(SeqId id, int pos, int layer, int kv) const {
  const Impl::Seq* s = impl_->Find(id);
  const int bs = impl_->bs;
  if (!s || pos < 0 || static_cast<size_t>(pos / bs) >= s->blocks.size()) return nullptr;
  return Row(s->blocks[static_cast<size_t>(pos / bs)], layer, kv, pos % bs);
}

uint8_t* KvCache::TokenRow(SeqId id, int pos, int layer, int kv) {
  return const_cast<uint8_t*>(std::as_const(*this).TokenRow(id, pos, layer, kv));
}

// ---- Self-check ---------------------------------------------------------------------------

absl::Status KvCache::CheckInvariants() const {
  const Impl& m = *impl_;
  std::vector<int32_t> refs(static_cast<size_t>(m.num_blocks), 0);
  for (const auto& [id, s] : m.seqs) {
    const int64_t want = (s.n_tokens + m.bs - 1) / m.bs;
    if (static_cast<int64_t>(s.blocks.size()) != want) {
      return absl::InternalError(absl::StrCat("sequence ", id, " holds ", s.blocks.size(),
                                              " blocks for ", s.n_tokens, " tokens"));
    }
    for (int32_t b : s.blocks) ++refs[static_cast<size_t>(b)];
  }
  int64_t free = 0, idle = 0;
  for (int32_t b = 0; b < m.num_blocks; ++b) {
    const int32_t r = m.alloc.ref_count(b);
    const bool is_free = m.alloc.is_free(b);
    const bool is_idle = m.prefix && m.prefix->is_idle(b);
    if (r != refs[static_cast<size_t>(b)]) {
      return absl::InternalError(absl::StrCat("block ", b, " has ref count ", r, " but ",
                                              refs[static_cast<size_t>(b)], " table entries"));
    }
    if ((r > 0) + is_free + is_idle != 1) {
      return absl::InternalError(absl::StrCat("block ", b, " is in ", (r > 0) + is_free + is_idle,
                                              " states (ref ", r, ", free ", is_free, ", idle ",
                                              is_idle, ")"));
    }
    if (is_idle && !m.prefix->IsCached(b)) {
      return absl::InternalError(absl::StrCat("idle block ", b, " is not a cache entry"));
    }
    free += is_free;
    idle += is_idle;
  }
  if (free != m.alloc.num_free() || (m.prefix && idle != m.prefix->num_idle())) {
    return absl::InternalError("free or idle counts disagree with the block states");
  }
  return absl::OkStatus();
}

}  // namespace pinfer
