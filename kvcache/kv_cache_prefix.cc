// KvCache's prefix caching and sliding windows: matching a prompt's cached blocks (in every
// layer group's tables), hashing computed blocks, and letting window tables' blocks go.
#include <algorithm>
#include <vector>

#include "kvcache/kv_cache.h"
#include "kvcache/kv_cache_impl.h"

namespace pinfer {
namespace {

// The cached blocks a prompt could take: hashes[k] names the prompt's first k + 1 blocks.
struct PrefixProbe {
  const KvCache::Impl& m;
  std::span<const int32_t> prompt;
  std::vector<uint64_t> hashes;

  uint64_t parent(int64_t k) const {
    return k == 0 ? PrefixCache::kRootHash : hashes[static_cast<size_t>(k - 1)];
  }
  std::span<const int32_t> chunk(int64_t k) const {
    return prompt.subspan(static_cast<size_t>(k * m.bs), static_cast<size_t>(m.bs));
  }
  int32_t Lookup(int table, int64_t k) const {
    return m.prefix->Lookup(table, hashes[static_cast<size_t>(k)], parent(k), chunk(k));
  }

  // The most leading blocks n <= limit such that every full table has blocks 0 .. n - 1
  // cached and every window table the blocks of the window of position n (the first query
  // still to compute): WindowFirstBlock .. n - 1.
  int64_t Longest(int64_t limit) const {
    int64_t n = limit;
    for (int t = 0; t < m.groups.num_tables(); ++t) {
      if (m.window_of(t) > 0) continue;
      for (int64_t k = 0; k < n; ++k) {
        if (Lookup(t, k) < 0) n = k;
      }
    }
    // A miss at block k in a window table rules out every n whose window covers k: retry
    // with n = k (whose window ends before k) until every window table is whole.
    for (bool changed = true; changed && n > 0;) {
      changed = false;
      for (int t = 0; t < m.groups.num_tables() && !changed; ++t) {
        const int w = m.window_of(t);
        if (w == 0) continue;
        for (int64_t k = n - 1; k >= WindowFirstBlock(w, n * m.bs, m.bs); --k) {
          if (Lookup(t, k) < 0) {
            n = k;
            changed = true;
            break;
          }
        }
      }
    }
    return n;
  }
};

}  // namespace

int KvCache::MatchPrefix(SeqId id, std::span<const int32_t> prompt) {
  Impl& m = *impl_;
  Impl::Seq* s = m.Find(id);
  if (!m.prefix || !s || s->n_tokens != 0 || prompt.empty()) return 0;
  const int64_t limit =
      std::min<int64_t>(static_cast<int64_t>(prompt.size()) - 1, config_.max_model_len) / m.bs;
  PrefixProbe probe{m, prompt, {}};
  for (int64_t k = 0; k < limit; ++k) {
    probe.hashes.push_back(PrefixCache::HashBlock(probe.parent(k), probe.chunk(k)));
  }
  const int64_t n = probe.Longest(limit);
  for (int t = 0; t < m.groups.num_tables(); ++t) {
    const int64_t first = WindowFirstBlock(m.window_of(t), n * m.bs, m.bs);
    std::vector<int32_t>& table = s->tables[static_cast<size_t>(t)];
    table.assign(static_cast<size_t>(n), kNoBlock);
    for (int64_t k = first; k < n; ++k) {
      const int32_t b = probe.Lookup(t, k);
      if (m.alloc.ref_count(b) == 0) {
        m.prefix->MarkInUse(b);
        m.alloc.Adopt(b);
      } else {
        m.alloc.Ref(b);
      }
      table[static_cast<size_t>(k)] = b;
    }
  }
  probe.hashes.resize(static_cast<size_t>(n));
  s->hashes = std::move(probe.hashes);
  s->n_tokens = n * m.bs;
  s->window_from = s->n_tokens;
  return static_cast<int>(s->n_tokens);
}

void KvCache::MarkComputed(SeqId id, std::span<const int32_t> computed) {
  Impl& m = *impl_;
  Impl::Seq* s = m.Find(id);
  if (!s) return;
  const int64_t done = std::min<int64_t>(static_cast<int64_t>(computed.size()), s->n_tokens);
  if (m.prefix) {
    for (int64_t k = static_cast<int64_t>(s->hashes.size()); k < done / m.bs; ++k) {
      const uint64_t parent =
          k == 0 ? PrefixCache::kRootHash : s->hashes[static_cast<size_t>(k - 1)];
      const auto chunk = computed.subspan(static_cast<size_t>(k * m.bs), static_cast<size_t>(m.bs));
      const uint64_t h = PrefixCache::HashBlock(parent, chunk);
      for (int t = 0; t < m.groups.num_tables(); ++t) {
        // No-op if present. A window table's block k is still held: it goes only once the
        // window has passed it, which needs done >= (k + 1) * bs, and it was hashed then.
        m.prefix->Insert(t, s->tables[static_cast<size_t>(t)][static_cast<size_t>(k)], h, parent,
                         chunk);
      }
      s->hashes.push_back(h);
    }
  }
  m.Slide(s, done);
}

void KvCache::Impl::Slide(Seq* s, int64_t next) {
  if (next <= s->window_from) return;
  const int64_t before = s->window_from;
  s->window_from = next;
  for (int t = 0; t < groups.num_tables(); ++t) {
    const int w = window_of(t);
    if (w == 0) continue;
    std::vector<int32_t>& table = s->tables[static_cast<size_t>(t)];
    // Oldest first, so the prefix cache evicts them in that order.
    for (int64_t k = WindowFirstBlock(w, before, bs); k < WindowFirstBlock(w, next, bs); ++k) {
      DropBlock(table[static_cast<size_t>(k)]);
      table[static_cast<size_t>(k)] = kNoBlock;
    }
  }
}

}  // namespace pinfer
