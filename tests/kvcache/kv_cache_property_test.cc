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
  const int bs = cache.block_size();
  const int max_len = c.max_model_len;

  std::mt19937 rng(p.seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::map<SeqId, std::vector<int32_t>> model;  // live sequences' tokens
  SeqId next_id = 1;
  // Shared prompt stems so that prefix hits happen.
  std::vector<std::vector<int32_t>> stems(3);
  for (auto& s : stems) {
    for (int i = 0; i < 70; ++i) s.push_back(uniform(0, 99));
  }
  int64_t prefix_hits = 0, exhausted = 0, cow_forks = 0;

  auto snapshot = [&] {
    Snapshot s{cache.Report().ToJson(), {}, cache.NumFreeBlocks()};
    for (const auto& [id, t] : model) {
      s.tables[id].assign(cache.BlockTable(id).begin(), cache.BlockTable(id).end());
    }
    return s;
  };
  auto write_rows = [&](SeqId id, size_t from) {
    const std::vector<float> rows = ExpectedRows(model[id]);
    for (size_t pos = from; pos < model[id].size(); ++pos) {
      for (int kv = 0; kv < 2; ++kv) {
        KvEncodeRow(KvDtype::kF32, &rows[2 * pos], cache.TokenRow(id, static_cast<int>(pos), 0, kv),
                    2);
      }
    }
  };
  auto check = [&](int step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    ASSERT_TRUE(cache.CheckInvariants().ok()) << cache.CheckInvariants();
    std::map<int32_t, int> refs;
    std::map<int32_t, int64_t> fill;
    for (const auto& [id, tokens] : model) {
      ASSERT_EQ(cache.num_tokens(id), static_cast<int>(tokens.size()));
      const auto table = cache.BlockTable(id);
      const int64_t n = static_cast<int64_t>(tokens.size());
      ASSERT_EQ(static_cast<int64_t>(table.size()), (n + bs - 1) / bs);
      if (p.layout == KvLayout::kPaged) {
        ASSERT_LT(static_cast<int64_t>(table.size()) * bs - n, bs);
      }
      for (size_t k = 0; k < table.size(); ++k) {
        ++refs[table[k]];
        fill[table[k]] =
            std::max<int64_t>(fill[table[k]], std::min<int64_t>(bs, n - (int64_t)k * bs));
      }
      const std::vector<float> rows = ExpectedRows(tokens);
      for (int64_t pos = 0; pos < n; ++pos) {
        for (int kv = 0; kv < 2; ++kv) {
          float got[2];
          KvDecodeRange(KvDtype::kF32, cache.TokenRow(id, static_cast<int>(pos), 0, kv), 2, 0, 2,
                        got);
          ASSERT_EQ(got[0], rows[2 * pos]) << "seq " << id << " pos " << pos << " kv " << kv;
          ASSERT_EQ(got[1], rows[2 * pos + 1]) << "seq " << id << " pos " << pos;
        }
      }
    }
    for (int32_t b = 0; b < cache.num_blocks(); ++b) {
      ASSERT_EQ(cache.ref_count(b), refs.count(b) ? refs[b] : 0) << "block " << b;
    }
    const OccupancyReport r = cache.Report();
    int64_t stored = 0;
    for (const auto& [b, f] : fill) stored += f;
    ASSERT_EQ(r.blocks_used, static_cast<int64_t>(refs.size()));
    ASSERT_EQ(r.blocks_used + r.blocks_free + r.blocks_cached, r.blocks_total);
    ASSERT_EQ(cache.NumFreeBlocks(), r.blocks_free + r.blocks_cached);
    if (!p.prefix) {
      ASSERT_EQ(r.blocks_cached, 0);
    }
    ASSERT_EQ(r.tokens_stored, stored);
    ASSERT_EQ(r.slots_allocated, r.blocks_used * bs);
    ASSERT_EQ(r.fragmentation, r.slots_allocated - r.tokens_stored);
    ASSERT_EQ(r.bytes_used, static_cast<uint64_t>(stored) * cache.bytes_per_token());
    ASSERT_EQ(r.seqs.size(), model.size());
  };
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(uniform(0, 99));
    return t;
  };
  auto append = [&](SeqId id, const std::vector<int32_t>& tokens) -> absl::Status {
    const Snapshot before = snapshot();
    const int64_t need = cache.BlocksNeeded(id, static_cast<int>(tokens.size()));
    const int64_t free_before = cache.NumFreeBlocks();
    const int64_t total = static_cast<int64_t>(model[id].size() + tokens.size());
    const absl::Status s = cache.Append(id, static_cast<int>(tokens.size()));
    if (total > max_len) {
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    } else if (need > free_before) {
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
      ++exhausted;
    } else {
      EXPECT_TRUE(s.ok()) << s;
    }
    if (!s.ok()) {
      EXPECT_TRUE(snapshot() == before) << "failed Append changed the cache: " << s;
      return s;
    }
    EXPECT_EQ(cache.NumFreeBlocks(), free_before - need);
    const size_t from = model[id].size();
    model[id].insert(model[id].end(), tokens.begin(), tokens.end());
    write_rows(id, from);
    if (uniform(0, 2) != 0) cache.MarkComputed(id, model[id]);
    return s;
  };
  auto random_live = [&]() -> SeqId {
    auto it = model.begin();
    std::advance(it, uniform(0, static_cast<int>(model.size()) - 1));
    return it->first;
  };

  constexpr int kSteps = 4000;
  for (int step = 0; step < kSteps; ++step) {
    const int op = uniform(0, 99);
    if (op < 25) {  // admit a new sequence with a prompt that may share a stem
      const SeqId id = next_id++;
      if (static_cast<int>(model.size()) >= c.max_num_seqs) {
        const Snapshot before = snapshot();
        EXPECT_EQ(cache.AddSequence(id).code(), absl::StatusCode::kResourceExhausted);
        EXPECT_TRUE(snapshot() == before);
      } else {
        ASSERT_TRUE(cache.AddSequence(id).ok());
        model[id];
        const auto& stem = stems[static_cast<size_t>(uniform(0, 2))];
        std::vector<int32_t> prompt(stem.begin(), stem.begin() + uniform(0, 60));
        const auto tail = random_tokens(uniform(1, 20));
        prompt.insert(prompt.end(), tail.begin(), tail.end());
        const int m = cache.MatchPrefix(id, prompt);
        ASSERT_EQ(m % bs, 0);
        ASSERT_LT(m, static_cast<int>(prompt.size()));
        if (!p.prefix) {
          ASSERT_EQ(m, 0);
        }
        prefix_hits += m > 0;
        model[id].assign(prompt.begin(), prompt.begin() + m);
        check(step);
        const absl::Status s = append(id, std::vector<int32_t>(prompt.begin() + m, prompt.end()));
        if (!s.ok() && uniform(0, 1)) {  // admission failed: give up on this sequence
          cache.Free(id);
          model.erase(id);
        }
      }
    } else if (op < 65 && !model.empty()) {  // decode or chunked prefill
      static constexpr int kLens[] = {1, 1, 1, 1, 2, 5, 16, 17, 40};
      append(random_live(), random_tokens(kLens[uniform(0, 8)])).IgnoreError();
    } else if (op < 75 && !model.empty()) {  // fork
      const SeqId parent = random_live(), child = next_id++;
      const Snapshot before = snapshot();
      const absl::Status s = cache.Fork(parent, child);
      if (static_cast<int>(model.size()) >= c.max_num_seqs) {
        EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
        EXPECT_TRUE(snapshot() == before);
      } else {
        ASSERT_TRUE(s.ok()) << s;
        model[child] = model[parent];
        cow_forks += model[child].size() % static_cast<size_t>(bs) != 0;
      }
    } else if (op < 90 && !model.empty()) {  // finish
      const SeqId id = random_live();
      cache.Free(id);
      model.erase(id);
    } else if (!model.empty()) {  // mark part of a sequence computed
      const SeqId id = random_live();
      const auto computed = std::span<const int32_t>(model[id]).first(
          static_cast<size_t>(uniform(0, static_cast<int>(model[id].size()))));
      cache.MarkComputed(id, computed);
    }
    check(step);
    if (HasFatalFailure()) return;
  }
  for (const auto& [id, t] : model) cache.Free(id);
  model.clear();
  check(kSteps);
  const OccupancyReport r = cache.Report();
  EXPECT_EQ(r.blocks_used, 0);
  EXPECT_EQ(r.blocks_free + r.blocks_cached, r.blocks_total);
  EXPECT_EQ(cache.NumFreeBlocks(), cache.num_blocks());
  EXPECT_GT(exhausted, 0) << "the pool never ran out; the test is too gentle";
  EXPECT_GT(cow_forks, 0);
  if (p.prefix) {
    EXPECT_GT(prefix_hits, 0);
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
