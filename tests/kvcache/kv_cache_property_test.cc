// Property test: thousands of seeded random operations on a small pool, with the cache's
// state checked against a plain model after every step.
//
// The test plays the engine: after each successful Append it writes every new token's K/V row
// in every layer (a value derived from the whole prefix up to that token and the layer, as
// real K/V is), sometimes marks tokens computed, and after every step reads every live
// sequence's rows back. Prefix hits, copy-on-write and eviction bugs all show up as a row that
// does not match its prefix.
//
// With sliding-window layers (layer groups with tables of their own), the model also knows
// where each sequence's last MarkComputed left its window: a window table must hold exactly
// the blocks from that window's first one on (the rows before it are gone: TokenRow gives
// nullptr), and a sequence never holds more blocks than the ledger's bound.
#include <map>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kvcache/kv_cache.h"
#include "kvcache/kv_codec.h"

namespace pinfer {
namespace {

struct Params {
  KvLayout layout;
  int block_size;
  bool prefix;
  uint32_t seed;
  std::vector<int> windows;  // per layer (0: full); empty: one full-attention layer
};

class KvCacheProperty : public ::testing::TestWithParam<Params> {};

// The "K/V" of token pos in a layer: a hash of the layer and tokens [0, pos], and the
// position, exact in float32.
std::vector<float> ExpectedRows(const std::vector<int32_t>& tokens, int layer) {
  std::vector<float> rows;
  uint64_t h = 1469598103934665603ull + static_cast<uint64_t>(layer) * 7919;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    h = (h ^ static_cast<uint32_t>(tokens[pos])) * 1099511628211ull;
    rows.push_back(static_cast<float>(h % (1u << 20)));
    rows.push_back(static_cast<float>(pos));
  }
  return rows;
}

struct Snapshot {
  std::string report;
  std::map<SeqId, std::vector<std::vector<int32_t>>> tables;
  int64_t free_blocks;
  bool operator==(const Snapshot&) const = default;
};

// One run: the cache, the plain model of what it must hold (each live sequence's tokens and
// the position its last MarkComputed reached), and the seeded choices.
class PropertyRun {
 public:
  PropertyRun(KvCache& cache, const Params& p, const KvCacheConfig& c)
      : cache_(cache), p_(p), c_(c), bs_(cache.block_size()), rng_(p.seed) {
    // Shared prompt stems so that prefix hits happen.
    for (auto& s : stems_) {
      for (int i = 0; i < 70; ++i) s.push_back(Uniform(0, 99));
    }
  }

  // kSteps random operations, the cache checked against the model after each.
  void Run(int steps) {
    for (int step = 0; step < steps; ++step) {
      const int op = Uniform(0, 99);
      if (op < 25) {  // admit a new sequence with a prompt that may share a stem
        Admit(step);
      } else if (op < 65 && !model_.empty()) {  // decode or chunked prefill
        static constexpr int kLens[] = {1, 1, 1, 1, 2, 5, 16, 17, 40};
        Append(RandomLive(), RandomTokens(kLens[Uniform(0, 8)])).IgnoreError();
      } else if (op < 75 && !model_.empty()) {
        Fork();
      } else if (op < 90 && !model_.empty()) {  // finish
        const SeqId id = RandomLive();
        cache_.Free(id);
        model_.erase(id);
        from_.erase(id);
      } else if (!model_.empty()) {  // mark part of a sequence computed
        const SeqId id = RandomLive();
        MarkComputed(id, static_cast<size_t>(Uniform(0, static_cast<int>(model_[id].size()))));
      }
      Check(step);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  // Every sequence freed: the pool must be whole again.
  void FreeAll(int step) {
    for (const auto& [id, t] : model_) cache_.Free(id);
    model_.clear();
    from_.clear();
    Check(step);
  }

  int64_t prefix_hits = 0, exhausted = 0, cow_forks = 0;
  int64_t window_hits = 0;  // prefix hits past a window (a window table starting with gaps)
  int64_t let_go = 0;       // table entries found let go by a window

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::vector<int32_t> RandomTokens(int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(Uniform(0, 99));
    return t;
  }
  SeqId RandomLive() {
    auto it = model_.begin();
    std::advance(it, Uniform(0, static_cast<int>(model_.size()) - 1));
    return it->first;
  }
  int n_layers() const { return c_.n_layers; }
  // The window the cache must apply to a layer's table: a paged cache lets blocks go for
  // windows shorter than max_model_len; otherwise the layer keeps every block.
  int TableWindow(int layer) const {
    const int w = p_.windows.empty() ? 0 : p_.windows[static_cast<size_t>(layer)];
    return p_.layout == KvLayout::kPaged && w < c_.max_model_len ? w : 0;
  }
  // The first position the layer's table still holds: the block of the window's first
  // position for the next query (at from_[id]).
  int64_t FirstHeld(SeqId id, int layer) {
    const int w = TableWindow(layer);
    if (w == 0) return 0;
    return std::max<int64_t>(0, from_[id] - w + 1) / bs_ * bs_;
  }

  void MarkComputed(SeqId id, size_t n) {
    cache_.MarkComputed(id, std::span<const int32_t>(model_[id]).first(n));
    from_[id] = std::max<int64_t>(from_[id], static_cast<int64_t>(n));
  }

  Snapshot Take() const {
    Snapshot s{cache_.Report().ToJson(), {}, cache_.NumFreeBlocks()};
    for (const auto& [id, t] : model_) {
      for (int table = 0; table < cache_.num_tables(); ++table) {
        const auto b = cache_.BlockTable(id, table);
        s.tables[id].emplace_back(b.begin(), b.end());
      }
    }
    return s;
  }

  // The engine's part: rows of the tokens from `from` on written, in every layer, as their
  // prefix's hash.
  void WriteRows(SeqId id, size_t from) {
    for (int l = 0; l < n_layers(); ++l) {
      const std::vector<float> rows = ExpectedRows(model_[id], l);
      for (size_t pos = from; pos < model_[id].size(); ++pos) {
        for (int kv = 0; kv < 2; ++kv) {
          uint8_t* row = cache_.TokenRow(id, static_cast<int>(pos), l, kv);
          ASSERT_NE(row, nullptr) << "seq " << id << " pos " << pos << " layer " << l;
          KvEncodeRow(KvDtype::kF32, &rows[2 * pos], row, 2);
        }
      }
    }
  }

  // Appends tokens to sequence id, expecting the outcome the model predicts (past
  // max_model_len: FailedPrecondition; too few free blocks: ResourceExhausted, the cache
  // unchanged); on success writes the rows and sometimes marks them computed.
  absl::Status Append(SeqId id, const std::vector<int32_t>& tokens) {
    const Snapshot before = Take();
    const int64_t need = cache_.BlocksNeeded(id, static_cast<int>(tokens.size()));
    const int64_t free_before = cache_.NumFreeBlocks();
    const int64_t total = static_cast<int64_t>(model_[id].size() + tokens.size());
    const absl::Status s = cache_.Append(id, static_cast<int>(tokens.size()));
    if (total > c_.max_model_len) {
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    } else if (need > free_before) {
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
      ++exhausted;
    } else {
      EXPECT_TRUE(s.ok()) << s;
    }
    if (!s.ok()) {
      EXPECT_TRUE(Take() == before) << "failed Append changed the cache: " << s;
      return s;
    }
    EXPECT_EQ(cache_.NumFreeBlocks(), free_before - need);
    const size_t from = model_[id].size();
    model_[id].insert(model_[id].end(), tokens.begin(), tokens.end());
    WriteRows(id, from);
    if (Uniform(0, 2) != 0) MarkComputed(id, model_[id].size());
    return s;
  }

  // A new sequence (refused past max_num_seqs) whose prompt may share a stem: its cached
  // prefix is matched, the rest appended.
  void Admit(int step) {
    const SeqId id = next_id_++;
    if (static_cast<int>(model_.size()) >= c_.max_num_seqs) {
      const Snapshot before = Take();
      EXPECT_EQ(cache_.AddSequence(id).code(), absl::StatusCode::kResourceExhausted);
      EXPECT_TRUE(Take() == before);
      return;
    }
    ASSERT_TRUE(cache_.AddSequence(id).ok());
    model_[id];
    const auto& stem = stems_[static_cast<size_t>(Uniform(0, 2))];
    std::vector<int32_t> prompt(stem.begin(), stem.begin() + Uniform(0, 60));
    const auto tail = RandomTokens(Uniform(1, 20));
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    const int m = cache_.MatchPrefix(id, prompt);
    ASSERT_EQ(m % bs_, 0);
    ASSERT_LT(m, static_cast<int>(prompt.size()));
    if (!p_.prefix) {
      ASSERT_EQ(m, 0);
    }
    prefix_hits += m > 0;
    model_[id].assign(prompt.begin(), prompt.begin() + m);
    from_[id] = m;
    for (int l = 0; l < n_layers(); ++l) window_hits += FirstHeld(id, l) > 0;
    Check(step);
    const absl::Status s = Append(id, std::vector<int32_t>(prompt.begin() + m, prompt.end()));
    if (!s.ok() && Uniform(0, 1)) {  // admission failed: give up on this sequence
      cache_.Free(id);
      model_.erase(id);
      from_.erase(id);
    }
  }

  // A fork of a live sequence (refused past max_num_seqs, the cache unchanged).
  void Fork() {
    const SeqId parent = RandomLive(), child = next_id_++;
    const Snapshot before = Take();
    const absl::Status s = cache_.Fork(parent, child);
    if (static_cast<int>(model_.size()) >= c_.max_num_seqs) {
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
      EXPECT_TRUE(Take() == before);
      return;
    }
    ASSERT_TRUE(s.ok()) << s;
    model_[child] = model_[parent];
    from_[child] = from_[parent];
    cow_forks += model_[child].size() % static_cast<size_t>(bs_) != 0;
  }

  // Each live sequence's tables and rows; reference counts, fill and the report's figures.
  void Check(int step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    ASSERT_TRUE(cache_.CheckInvariants().ok()) << cache_.CheckInvariants();
    std::map<int32_t, int> refs;
    std::map<int32_t, int64_t> fill;
    for (const auto& [id, tokens] : model_) {
      ASSERT_NO_FATAL_FAILURE(CheckSequence(id, tokens, &refs, &fill));
    }
    for (int32_t b = 0; b < cache_.num_blocks(); ++b) {
      ASSERT_EQ(cache_.ref_count(b), refs.count(b) ? refs[b] : 0) << "block " << b;
    }
    const OccupancyReport r = cache_.Report();
    int64_t stored = 0;
    for (const auto& [b, f] : fill) stored += f;
    ASSERT_EQ(r.blocks_used, static_cast<int64_t>(refs.size()));
    ASSERT_EQ(r.blocks_used + r.blocks_free + r.blocks_cached, r.blocks_total);
    ASSERT_EQ(cache_.NumFreeBlocks(), r.blocks_free + r.blocks_cached);
    if (!p_.prefix) {
      ASSERT_EQ(r.blocks_cached, 0);
    }
    ASSERT_EQ(r.tokens_stored, stored);
    ASSERT_EQ(r.slots_allocated, r.blocks_used * bs_);
    ASSERT_EQ(r.fragmentation, r.slots_allocated - r.tokens_stored);
    ASSERT_EQ(r.slot_bytes * static_cast<uint64_t>(bs_), cache_.block_bytes());
    ASSERT_EQ(r.bytes_used, static_cast<uint64_t>(stored) * r.slot_bytes);
    int64_t group_blocks = 0, group_tokens = 0;
    for (const GroupOccupancy& g : r.groups) {
      group_blocks += g.blocks_used;
      group_tokens += g.tokens_stored;
    }
    ASSERT_EQ(group_blocks, r.blocks_used);
    ASSERT_EQ(group_tokens, r.tokens_stored);
    ASSERT_EQ(r.seqs.size(), model_.size());
  }

  // A layer's rows: gone before the window's first held block, its prefix's hash after.
  void CheckRows(SeqId id, const std::vector<int32_t>& tokens, int layer) {
    const std::vector<float> rows = ExpectedRows(tokens, layer);
    const int64_t first = FirstHeld(id, layer);
    for (int64_t pos = 0; pos < static_cast<int64_t>(tokens.size()); ++pos) {
      for (int kv = 0; kv < 2; ++kv) {
        const uint8_t* row = cache_.TokenRow(id, static_cast<int>(pos), layer, kv);
        if (pos < first) {
          ASSERT_EQ(row, nullptr) << "seq " << id << " pos " << pos << " layer " << layer;
          continue;
        }
        ASSERT_NE(row, nullptr) << "seq " << id << " pos " << pos << " layer " << layer;
        float got[2];
        KvDecodeRange(KvDtype::kF32, row, 2, 0, 2, got);
        ASSERT_EQ(got[0], rows[2 * pos]) << "seq " << id << " pos " << pos << " layer " << layer;
        ASSERT_EQ(got[1], rows[2 * pos + 1]) << "seq " << id << " pos " << pos;
      }
    }
  }

  void CheckSequence(SeqId id, const std::vector<int32_t>& tokens, std::map<int32_t, int>* refs,
                     std::map<int32_t, int64_t>* fill) {
    ASSERT_EQ(cache_.num_tokens(id), static_cast<int>(tokens.size()));
    const int64_t n = static_cast<int64_t>(tokens.size());
    for (int l = 0; l < n_layers(); ++l) {
      const auto table = cache_.LayerBlockTable(id, l);
      ASSERT_EQ(static_cast<int64_t>(table.size()), (n + bs_ - 1) / bs_);
      if (p_.layout == KvLayout::kPaged) {
        ASSERT_LT(static_cast<int64_t>(table.size()) * bs_ - n, bs_);
      }
      for (int64_t k = 0; k < static_cast<int64_t>(table.size()); ++k) {
        ASSERT_EQ(table[static_cast<size_t>(k)] == kNoBlock, k * bs_ < FirstHeld(id, l))
            << "seq " << id << " layer " << l << " block " << k;
      }
      ASSERT_NO_FATAL_FAILURE(CheckRows(id, tokens, l));
    }
    int64_t held = 0;
    for (int t = 0; t < cache_.num_tables(); ++t) {
      const auto table = cache_.BlockTable(id, t);
      for (size_t k = 0; k < table.size(); ++k) {
        if (table[k] == kNoBlock) {
          ++let_go;
          continue;
        }
        ++held;
        ++(*refs)[table[k]];
        (*fill)[table[k]] =
            std::max<int64_t>((*fill)[table[k]], std::min<int64_t>(bs_, n - (int64_t)k * bs_));
      }
    }
    // The ledger's figures: never more than the bound for a step of n - from_ positions, and
    // exactly BlocksHeld once the sequence's every position is computed.
    const KvLayerGroups& g = cache_.layer_groups();
    ASSERT_LE(held, g.MaxBlocksPerSequence(n, bs_, n - from_[id])) << "seq " << id;
    if (from_[id] == n) {
      ASSERT_EQ(held, g.BlocksHeld(n, bs_)) << "seq " << id;
    }
  }

  KvCache& cache_;
  const Params p_;
  const KvCacheConfig c_;
  const int bs_;
  std::mt19937 rng_;
  std::map<SeqId, std::vector<int32_t>> model_;  // live sequences' tokens
  std::map<SeqId, int64_t> from_;                // where MarkComputed (or a prefix hit) got to
  SeqId next_id_ = 1;
  std::vector<std::vector<int32_t>> stems_ = std::vector<std::vector<int32_t>>(3);
};

TEST_P(KvCacheProperty, RandomOperationsKeepInvariants) {
  const Params p = GetParam();
  KvCacheConfig c;
  c.n_layers = p.windows.empty() ? 1 : static_cast<int>(p.windows.size());
  c.layer_windows = p.windows;
  c.n_kv_heads = 1;
  c.head_dim = 2;
  c.dtype = KvDtype::kF32;
  c.layout = p.layout;
  c.block_size = p.block_size;
  c.max_model_len = p.layout == KvLayout::kPaged ? 96 : 48;
  c.max_num_seqs = 6;
  c.prefix_caching = p.prefix;
  // About 2.5 sequences of max_model_len in every table: enough to run out now and then.
  const int tables = KvLayerGroupsFor(c).num_tables();
  c.num_blocks = p.layout == KvLayout::kPaged ? 240 / p.block_size * (2 + tables) / 3 : 4;
  auto created = KvCache::Create(c);
  ASSERT_TRUE(created.ok()) << created.status();
  KvCache& cache = **created;
  PropertyRun run(cache, p, c);
  constexpr int kSteps = 4000;
  run.Run(kSteps);
  if (HasFatalFailure()) return;
  run.FreeAll(kSteps);
  const OccupancyReport r = cache.Report();
  EXPECT_EQ(r.blocks_used, 0);
  EXPECT_EQ(r.blocks_free + r.blocks_cached, r.blocks_total);
  EXPECT_EQ(cache.NumFreeBlocks(), cache.num_blocks());
  EXPECT_GT(run.exhausted, 0) << "the pool never ran out; the test is too gentle";
  EXPECT_GT(run.cow_forks, 0);
  if (p.prefix) {
    EXPECT_GT(run.prefix_hits, 0);
  }
  if (cache.layer_groups().has_windows()) {
    EXPECT_GT(run.let_go, 0) << "no window ever let a block go";
    if (p.prefix) {
      EXPECT_GT(run.window_hits, 0) << "no prefix hit reached past a window";
    }
  } else {
    EXPECT_EQ(run.let_go, 0);
  }
}

// Layer windows: none (one layer, one table); three groups of one table per layer (full,
// window 24 on two layers, window 40); and blocks of two layers (four full layers, two of them
// with a window past max_model_len 96, which lets nothing go, and two with window 20).
const std::vector<std::vector<int>> kWindows = {{}, {24, 0, 24, 40}, {0, 0, 20, 20, 100, 100}};

std::vector<Params> AllParams() {
  std::vector<Params> out;
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    for (const std::vector<int>& w : kWindows) {
      for (int bs : {8, 16}) {
        for (bool prefix : {true, false}) out.push_back({KvLayout::kPaged, bs, prefix, seed, w});
      }
    }
    // Contiguous: every layer keeps its whole block (windows only mask).
    out.push_back({KvLayout::kContiguous, 16, false, seed, {}});
    out.push_back({KvLayout::kContiguous, 16, false, seed, kWindows[1]});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Seeds, KvCacheProperty, ::testing::ValuesIn(AllParams()),
                         [](const testing::TestParamInfo<Params>& info) {
                           const Params& p = info.param;
                           std::string windows = p.windows.empty() ? "" : "_windows";
                           for (int w : p.windows) absl::StrAppend(&windows, "_", w);
                           return absl::StrCat(std::string(KvLayoutName(p.layout)), "_bs",
                                               p.block_size, p.prefix ? "_prefix" : "", windows,
                                               "_seed", p.seed);
                         });

}  // namespace
}  // namespace pinfer
