// Sliding-window models through the engine: a long generation holds a bounded number of KV
// blocks (the window layers' tables let their old blocks go), exactly the blocks the layer
// groups predict after every step; and many requests through a small pool (preemption,
// prefix hits past the window, forks) give the tokens each gives alone with a contiguous
// cache (which keeps every block and only masks).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_helpers.h"
#include "tests/testing/synth_models.h"

namespace pinfer {
namespace {

constexpr int kWindow = 32;  // every tiny-* shape's window
constexpr int kBs = 16;

// An engine config of F32 KV in blocks of kBs, sequences of at most 256 tokens.
EngineConfig WindowConfig(int max_num_seqs, int64_t max_num_batched_tokens, uint64_t pool_bytes) {
  EngineConfig cfg = testing::SmallConfig(KvDtype::kF32);
  cfg.block_size = kBs;
  cfg.max_model_len = 256;
  cfg.max_num_seqs = max_num_seqs;
  cfg.max_num_batched_tokens = max_num_batched_tokens;
  cfg.kv_cache_memory = pool_bytes;
  return cfg;
}

struct Held {
  int64_t blocks = 0;
  uint64_t bytes = 0;
};

// One greedy request of an 8-token prompt generating to 4 x the window, alone. Checks after
// every step that the pool holds exactly the blocks the layer groups predict for the computed
// tokens (KvLayerGroups::BlocksHeld), never more than the ledger counted for a sequence;
// returns what it holds by computed length.
std::map<int64_t, Held> Generate(const Model& model) {
  EngineConfig cfg = WindowConfig(8, 16, 4ull << 20);
  cfg.prefix_caching = false;
  auto created = Engine::Create(model, cfg, nullptr, true);
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok()) return {};
  Engine& e = **created;
  GenerationRequest req;
  req.prompt = {1, 17, 33, 49, 65, 81, 97, 113};
  req.params.temperature = 0;
  req.params.ignore_eos = true;
  req.params.max_tokens = 4 * kWindow;
  EXPECT_TRUE(e.AddRequest(req).ok());
  std::map<int64_t, Held> held;
  while (e.HasWork()) {
    auto step = e.Step();
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) return {};
    const OccupancyReport r = e.KvReport();
    if (r.seqs.empty()) break;  // finished and freed
    const int64_t n = r.seqs[0].tokens;
    EXPECT_EQ(r.blocks_used, e.cache().layer_groups().BlocksHeld(n, kBs)) << n << " tokens";
    EXPECT_LE(r.blocks_used, e.ledger().blocks_per_sequence) << n << " tokens";
    held[n] = {r.blocks_used, static_cast<uint64_t>(r.blocks_used) * e.cache().block_bytes()};
  }
  return held;
}

// tiny-mistral-swa: every layer has the window, so the sequence's one table holds at most
// ceil((32 + 15) / 16) = 3 blocks whatever its length (2 between steps): 2 at 2x and at 4x
// the window, where the windows ignored it would hold 4 and 8. tiny-gemma2: two window layers
// and two full ones, blocks of two layers: the full table grows (4, then 8), the window table
// stays at 2.
TEST(WindowOccupancy, ALongGenerationHoldsTheWindowsBlocksOnly) {
  const std::map<std::string, std::pair<int64_t, int64_t>> want = {{"tiny-mistral-swa", {2, 2}},
                                                                   {"tiny-gemma2", {4 + 2, 8 + 2}}};
  for (const auto& [shape, blocks] : want) {
    SCOPED_TRACE(shape);
    std::unique_ptr<Model> model = testing::SynthModel(shape, "F32");
    ASSERT_NE(model, nullptr);
    const std::map<int64_t, Held> held = Generate(*model);
    ASSERT_TRUE(held.count(2 * kWindow) && held.count(4 * kWindow));
    EXPECT_EQ(held.at(2 * kWindow).blocks, blocks.first);
    EXPECT_EQ(held.at(4 * kWindow).blocks, blocks.second);
    for (int64_t n : {2 * kWindow, 4 * kWindow}) {
      std::printf("%s: %lld tokens, %lld blocks held (%llu bytes)\n", shape.c_str(),
                  static_cast<long long>(n), static_cast<long long>(held.at(n).blocks),
                  static_cast<unsigned long long>(held.at(n).bytes));
    }
  }
}

// Admission admits what the windows allow: a pool of 16 blocks holds one 256-token sequence
// of tiny-mistral-swa with the window ignored, but four with it (4 blocks each at 16-token
// steps, the ledger's count); four requests generating to 4 x the window run together, none
// preempted, each holding at most that.
TEST(WindowAdmission, APoolOfFourWindowsRunsFourLongSequencesAtOnce) {
  std::unique_ptr<Model> model = testing::SynthModel("tiny-mistral-swa", "F32");
  ASSERT_NE(model, nullptr);
  // 16 blocks of 4 layers, K and V, 256-byte rows.
  EngineConfig cfg = WindowConfig(4, 16, 16ull * 4 * 2 * kBs * 256);
  cfg.prefix_caching = false;
  auto created = Engine::Create(*model, cfg, nullptr, true);
  ASSERT_TRUE(created.ok()) << created.status();
  Engine& e = **created;
  EXPECT_EQ(e.cache().num_blocks(), 16);
  EXPECT_EQ(e.ledger().blocks_per_sequence, 4);
  EXPECT_EQ(e.ledger().blocks_per_sequence_full, 16);
  EXPECT_EQ(e.ledger().max_concurrency, 4);
  for (int i = 0; i < 4; ++i) {
    GenerationRequest req;
    req.prompt = {1, 17, 33, 49, 65, 81, 97, static_cast<int32_t>(113 + i)};
    req.params.temperature = 0;
    req.params.ignore_eos = true;
    req.params.max_tokens = 4 * kWindow;
    ASSERT_TRUE(e.AddRequest(req).ok());
  }
  size_t most_running = 0;
  while (e.HasWork()) {
    auto step = e.Step();
    ASSERT_TRUE(step.ok()) << step.status();
    const OccupancyReport r = e.KvReport();
    most_running = std::max(most_running, r.seqs.size());
    EXPECT_LE(r.blocks_used, 4 * e.ledger().blocks_per_sequence);
  }
  EXPECT_EQ(most_running, 4u);
  EXPECT_EQ(e.stats().preemptions, 0);
  EXPECT_EQ(e.KvReport().blocks_used, 0);
}

// 24 requests of tiny-gemma2 (window and full layer groups) through a pool of 40 blocks:
// prompts of 10..100 tokens sharing stems (prefix hits past the 32-token window), outputs of
// 8..60 tokens, every fourth request forked in two. Each completion equals the request run
// alone with the contiguous layout; every block comes back.
TEST(WindowScheduling, ASmallPoolOfWindowTablesGivesTheTokensOfRunningAlone) {
  std::unique_ptr<Model> model = testing::SynthModel("tiny-gemma2", "F32");
  ASSERT_NE(model, nullptr);
  // 40 blocks of 2 layers, K and V, 512-byte rows.
  EngineConfig cfg = WindowConfig(12, 64, 40ull * 2 * 2 * kBs * 512);
  auto created = Engine::Create(*model, cfg, nullptr, true);
  ASSERT_TRUE(created.ok()) << created.status();
  Engine& e = **created;
  ASSERT_TRUE(e.cache().layer_groups().has_windows());
  // 40 blocks of two layers: 16 tokens of the two full layers, or of the two window layers.
  EXPECT_EQ(e.cache().num_blocks(), 40);
  const std::vector<int32_t> stem = testing::LongPrompt();
  std::map<int64_t, GenerationRequest> requests;
  for (int i = 0; i < 24; ++i) {
    GenerationRequest req;
    req.prompt.assign(stem.begin(), stem.begin() + 10 + (i * 37) % 91);
    if (i % 3 == 1) req.prompt.back() = 500 - i;  // diverge in the last block
    req.params.temperature = 0;
    req.params.ignore_eos = true;
    req.params.max_tokens = 8 + (i * 23) % 53;
    req.n = i % 4 == 3 ? 2 : 1;
    auto id = e.AddRequest(req);
    ASSERT_TRUE(id.ok()) << id.status();
    requests[*id] = req;
  }
  std::map<std::pair<int64_t, int>, std::vector<int32_t>> outputs;
  int64_t cached_prompt_tokens = 0;
  while (e.HasWork()) {
    auto step = e.Step();
    ASSERT_TRUE(step.ok()) << step.status();
    for (const SequenceOutput& o : *step) {
      auto& out = outputs[{o.request_id, o.index}];
      out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished) cached_prompt_tokens += o.cached_prompt_tokens;
    }
    ASSERT_TRUE(e.cache().CheckInvariants().ok()) << e.cache().CheckInvariants();
  }
  EXPECT_GT(e.stats().preemptions, 0) << "the pool never ran short; the test is too gentle";
  EXPECT_GT(cached_prompt_tokens, 2 * kWindow);
  EXPECT_EQ(e.KvReport().blocks_used, 0);
  EngineConfig alone = cfg;
  alone.kv_layout = KvLayout::kContiguous;
  alone.kv_cache_memory = 4ull << 20;  // 4 sequences of 256 tokens
  for (const auto& [id, req] : requests) {
    auto want = testing::GreedyTokens(*model, alone, req.prompt, req.params.max_tokens);
    ASSERT_TRUE(want.ok()) << want.status();
    for (int index = 0; index < req.n; ++index) {
      const std::vector<int32_t>& got = outputs[{id, index}];
      ASSERT_GE(got.size(), want->size()) << "request " << id;
      EXPECT_TRUE(std::equal(want->begin(), want->end(), got.begin()))
          << "request " << id << " completion " << index;
    }
  }
}

}  // namespace
}  // namespace pinfer
