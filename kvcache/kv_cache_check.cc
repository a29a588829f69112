// KvCache::CheckInvariants: the block tables, reference counts, free list and prefix cache
// agree, table by table.
#include <vector>

#include "absl/strings/str_cat.h"
#include "kvcache/kv_cache.h"
#include "kvcache/kv_cache_impl.h"

namespace pinfer {
namespace {

// One table of one sequence: its length, its leading kNoBlock entries (exactly the window's
// first block, none for a full table) and then blocks only, each counted in refs and owned by
// this table index wherever it appears (owner).
absl::Status CheckTable(const KvCache::Impl& m, SeqId id, const KvCache::Impl::Seq& s, int t,
                        std::vector<int32_t>* refs, std::vector<int>* owner) {
  const std::vector<int32_t>& table = s.tables[static_cast<size_t>(t)];
  const int64_t want = (s.n_tokens + m.bs - 1) / m.bs;
  if (static_cast<int64_t>(table.size()) != want) {
    return absl::InternalError(absl::StrCat("sequence ", id, "'s table ", t, " holds ",
                                            table.size(), " entries for ", s.n_tokens, " tokens"));
  }
  const int64_t first = WindowFirstBlock(m.window_of(t), s.window_from, m.bs);
  for (int64_t k = 0; k < want; ++k) {
    const int32_t b = table[static_cast<size_t>(k)];
    if ((b == kNoBlock) != (k < first)) {
      return absl::InternalError(absl::StrCat(
          "sequence ", id, "'s table ", t, " (window ", m.window_of(t), ") has entry ", b,
          " at block ", k, "; blocks before ", first, " must be let go and none after"));
    }
    if (b == kNoBlock) continue;
    if (b < 0 || b >= m.num_blocks) {
      return absl::InternalError(
          absl::StrCat("sequence ", id, " holds block ", b, " outside the pool of ", m.num_blocks));
    }
    int& o = (*owner)[static_cast<size_t>(b)];
    if (o >= 0 && o != t) {
      return absl::InternalError(
          absl::StrCat("block ", b, " is in table ", o, " and table ", t, " at once"));
    }
    o = t;
    ++(*refs)[static_cast<size_t>(b)];
  }
  return absl::OkStatus();
}

// Each block is in exactly one state, with as many references as table entries; idle blocks
// are cache entries of the table that holds them.
absl::Status CheckBlock(const KvCache::Impl& m, int32_t b, int32_t table_refs, int owner) {
  const int32_t r = m.alloc.ref_count(b);
  const bool is_free = m.alloc.is_free(b);
  const bool is_idle = m.prefix && m.prefix->is_idle(b);
  if (r != table_refs) {
    return absl::InternalError(
        absl::StrCat("block ", b, " has ref count ", r, " but ", table_refs, " table entries"));
  }
  if ((r > 0) + is_free + is_idle != 1) {
    return absl::InternalError(absl::StrCat("block ", b, " is in ", (r > 0) + is_free + is_idle,
                                            " states (ref ", r, ", free ", is_free, ", idle ",
                                            is_idle, ")"));
  }
  if (is_idle && !m.prefix->IsCached(b)) {
    return absl::InternalError(absl::StrCat("idle block ", b, " is not a cache entry"));
  }
  if (m.prefix && m.prefix->IsCached(b) && owner >= 0 && m.prefix->table_of(b) != owner) {
    return absl::InternalError(absl::StrCat("block ", b, " is cached for table ",
                                            m.prefix->table_of(b), " but held in table ", owner));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status KvCache::CheckInvariants() const {
  const Impl& m = *impl_;
  std::vector<int32_t> refs(static_cast<size_t>(m.num_blocks), 0);
  std::vector<int> owner(static_cast<size_t>(m.num_blocks), -1);
  for (const auto& [id, s] : m.seqs) {
    if (static_cast<int>(s.tables.size()) != m.groups.num_tables()) {
      return absl::InternalError(absl::StrCat("sequence ", id, " has ", s.tables.size(),
                                              " tables, not ", m.groups.num_tables()));
    }
    if (s.window_from > s.n_tokens) {
      return absl::InternalError(absl::StrCat("sequence ", id, " let go of positions up to ",
                                              s.window_from, " of its ", s.n_tokens));
    }
    for (int t = 0; t < m.groups.num_tables(); ++t) {
      if (absl::Status st = CheckTable(m, id, s, t, &refs, &owner); !st.ok()) return st;
    }
  }
  int64_t free = 0, idle = 0;
  for (int32_t b = 0; b < m.num_blocks; ++b) {
    const size_t i = static_cast<size_t>(b);
    if (absl::Status st = CheckBlock(m, b, refs[i], owner[i]); !st.ok()) return st;
    free += m.alloc.is_free(b);
    idle += m.prefix && m.prefix->is_idle(b);
  }
  if (free != m.alloc.num_free() || (m.prefix && idle != m.prefix->num_idle())) {
    return absl::InternalError("free or idle counts disagree with the block states");
  }
  return absl::OkStatus();
}

}  // namespace pinfer
