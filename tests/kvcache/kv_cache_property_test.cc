// Property test: thousands of seeded random operations on a small pool, with the cache's
// state checked against a plain model after every step.
//
// The test plays the engine: after each successful Append it writes every new token's K/V row
// (a value derived from the whole prefix up to that token, as real K/V is), sometimes marks
// tokens computed, and after every step reads every live sequence's rows back. Prefix hits,
// copy-on-write and eviction bugs all show up as a row that does not match its prefix.
#include <map>
#include <random>
#include <set>
#include <span>
#include <vector>

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
};

class KvCacheProperty : public ::testing::TestWithParam<Params> {};

// The "K/V" of token pos: a hash of tokens [0, pos] and the position, exact in float32.
std::vector<float> ExpectedRows(const std::vector<int32_t>& tokens) {
  std::vector<float> rows;
  uint64_t h = 1469598103934665603ull;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    h = (h ^ static_cast<uint32_t>(tokens[pos])) * 1099511628211ull;
    rows.push_back(static_cast<float>(h % (1u << 20)));
    rows.push_back(static_cast<float>(pos));
  }
  return rows;
}

struct Snapshot {
  std::string report;
  std::map<SeqId, std::vector<int32_t>> tables;
  int64_t free_blocks;
  bool operator==(const Snapshot&) const = default;
};

// One run: the cache, the plain model of what it must hold (each live sequence's tokens),
// and the seeded choices.
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
      } else if (!model_.empty()) {  // mark part of a sequence computed
        const SeqId id = RandomLive();
        const auto computed =
            std::span<const int32_t>(model_[id])
                .first(static_cast<size_t>(Uniform(0, static_cast<int>(model_[id].size()))));
        cache_.MarkComputed(id, computed);
      }
      Check(step);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  // Every sequence freed: the pool must be whole again.
  void FreeAll(int step) {
    for (const auto& [id, t] : model_) cache_.Free(id);
    model_.clear();
    Check(step);
  }

  int64_t prefix_hits = 0, exhausted = 0, cow_forks = 0;

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

  Snapshot Take() const {
    Snapshot s{cache_.Report().ToJson(), {}, cache_.NumFreeBlocks()};
    for (const auto& [id, t] : model_) {
      s.tables[id].assign(cache_.BlockTable(id).begin(), cache_.BlockTable(id).end());
    }
    return s;
  }

  // The engine's part: rows of the tokens from `from` on written as their prefix's hash.
  void WriteRows(SeqId id, size_t from) {
    const std::vector<float> rows = ExpectedRows(model_[id]);
    for (size_t pos = from; pos < model_[id].size(); ++pos) {
      for (int kv = 0; kv < 2; ++kv) {
        KvEncodeRow(KvDtype::kF32, &rows[2 * pos],
                    cache_.TokenRow(id, static_cast<int>(pos), 0, kv), 2);
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
    if (Uniform(0, 2) != 0) cache_.MarkComputed(id, model_[id]);
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
    Check(step);
    const absl::Status s = Append(id, std::vector<int32_t>(prompt.begin() + m, prompt.end()));
    if (!s.ok() && Uniform(0, 1)) {  // admission failed: give up on this sequence
      cache_.Free(id);
      model_.erase(id);
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
    cow_forks += model_[child].size() % static_cast<size_t>(bs_) != 0;
  }

  // Each live sequence's table and rows; reference counts, fill and the report's figures.
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
    ASSERT_EQ(r.bytes_used, static_cast<uint64_t>(stored) * cache_.bytes_per_token());
    ASSERT_EQ(r.seqs.size(), model_.size());
  }

  void CheckSequence(SeqId id, const std::vector<int32_t>& tokens, std::map<int32_t, int>* refs,
                     std::map<int32_t, int64_t>* fill) {
    ASSERT_EQ(cache_.num_tokens(id), static_cast<int>(tokens.size()));
    const auto table = cache_.BlockTable(id);
    const int64_t n = static_cast<int64_t>(tokens.size());
    ASSERT_EQ(static_cast<int64_t>(table.size()), (n + bs_ - 1) / bs_);
    if (p_.layout == KvLayout::kPaged) {
      ASSERT_LT(static_cast<int64_t>(table.size()) * bs_ - n, bs_);
    }
    for (size_t k = 0; k < table.size(); ++k) {
      ++(*refs)[table[k]];
      (*fill)[table[k]] =
          std::max<int64_t>((*fill)[table[k]], std::min<int64_t>(bs_, n - (int64_t)k * bs_));
    }
    const std::vector<float> rows = ExpectedRows(tokens);
    for (int64_t pos = 0; pos < n; ++pos) {
      for (int kv = 0; kv < 2; ++kv) {
        float got[2];
        KvDecodeRange(KvDtype::kF32, cache_.TokenRow(id, static_cast<int>(pos), 0, kv), 2, 0, 2,
                      got);
        ASSERT_EQ(got[0], rows[2 * pos]) << "seq " << id << " pos " << pos << " kv " << kv;
        ASSERT_EQ(got[1], rows[2 * pos + 1]) << "seq " << id << " pos " << pos;
      }
    }
  }

  KvCache& cache_;
  const Params p_;
  const KvCacheConfig c_;
  const int bs_;
  std::mt19937 rng_;
  std::map<SeqId, std::vector<int32_t>> model_;  // live sequences' tokens
  SeqId next_id_ = 1;
  std::vector<std::vector<int32_t>> stems_ = std::vector<std::vector<int32_t>>(3);
};

TEST_P(KvCacheProperty, RandomOperationsKeepInvariants) {
  const Params p = GetParam();
  KvCacheConfig c;
  c.n_layers = 1;
  c.n_kv_heads = 1;
  c.head_dim = 2;
  c.dtype = KvDtype::kF32;
  c.layout = p.layout;
  c.block_size = p.block_size;
  c.max_model_len = p.layout == KvLayout::kPaged ? 96 : 48;
  c.max_num_seqs = 6;
  c.num_blocks = p.layout == KvLayout::kPaged ? 240 / p.block_size : 4;
  c.prefix_caching = p.prefix;
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
}

std::vector<Params> AllParams() {
  std::vector<Params> out;
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    for (int bs : {8, 16}) {
      for (bool prefix : {true, false}) out.push_back({KvLayout::kPaged, bs, prefix, seed});
    }
    out.push_back({KvLayout::kContiguous, 16, false, seed});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Seeds, KvCacheProperty, ::testing::ValuesIn(AllParams()),
                         [](const testing::TestParamInfo<Params>& info) {
                           const Params& p = info.param;
                           return std::string(KvLayoutName(p.layout)) + "_bs" +
                                  std::to_string(p.block_size) + (p.prefix ? "_prefix" : "") +
                                  "_seed" + std::to_string(p.seed);
                         });

}  // namespace
}  // namespace pinfer
