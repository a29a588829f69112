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
#include "engine/memory/memory_ledger.h"
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

// tiny-gemma3 (five window-32 layers to each full one; blocks of one layer: a full table and
// five window tables a sequence) generating 335 tokens from BOS, a token a step (so the
// ledger's chunk is the engine's: max_num_batched_tokens 1). At the peak of every step (the
// step observer: the new block taken, out-of-window blocks not yet let go), the most blocks
// each layer group has held so far is exactly the ledger's rule for a sequence of that length
// (KvSequenceGroupBlocks per group; in all, the bytes of KvSequenceCostFor for a
// max_model_len of that length), and at the end the engine's own ledger (kv_groups).
// The full table grows a block every 16 tokens; each window table stops at 3 blocks, its
// older blocks freed as the window moves.
TEST(WindowOccupancy, Gemma3PeakBlocksPerGroupAreTheLedgersAtEveryLength) {
  std::unique_ptr<Model> model = testing::SynthModel("tiny-gemma3", "F32");
  ASSERT_NE(model, nullptr);
  constexpr int kLen = 336;
  EngineConfig cfg = WindowConfig(1, 1, 4ull << 20);
  cfg.max_model_len = kLen;
  cfg.prefix_caching = false;
  auto created = Engine::Create(*model, cfg, nullptr, true);
  ASSERT_TRUE(created.ok()) << created.status();
  Engine& e = **created;
  const ModelConfig& mc = model->config();
  const KvCacheConfig kc = LedgerKvConfig(mc, KvDtype::kF32, KvLayout::kPaged, kBs, kLen);
  ASSERT_EQ(e.ledger().kv_groups.size(), 2u);
  ASSERT_EQ(e.ledger().kv_groups[1].window, kWindow);
  ASSERT_EQ(e.ledger().kv_groups[1].tables, 5);
  std::vector<int64_t> peak(2, 0);
  std::map<int64_t, std::vector<int64_t>> at;  // the step's blocks by group, by length
  e.SetStepObserver([&](const Engine& en) {
    const OccupancyReport r = en.KvReport();
    ASSERT_EQ(r.seqs.size(), 1u);
    ASSERT_EQ(r.groups.size(), 2u);
    const int64_t n = r.seqs[0].tokens;
    const std::vector<int64_t> want = KvSequenceGroupBlocks(kc, n, 1);
    auto cost = KvSequenceCostFor(LedgerKvConfig(mc, KvDtype::kF32, KvLayout::kPaged, kBs, n), 1);
    ASSERT_TRUE(cost.ok()) << cost.status();
    int64_t most = 0;
    for (size_t g = 0; g < 2; ++g) {
      peak[g] = std::max(peak[g], r.groups[g].blocks_used);
      EXPECT_EQ(peak[g], want[g]) << "group " << g << " at " << n << " tokens";
      most += peak[g];
    }
    // Bytes: up to the window a ledger of max_model_len n has one group, blocks of 6 layers.
    EXPECT_EQ(static_cast<uint64_t>(most) * en.cache().block_bytes(),
              static_cast<uint64_t>(cost->blocks_per_sequence) * cost->bytes_per_block)
        << n << " tokens";
    at[n] = {r.groups[0].blocks_used, r.groups[1].blocks_used};
  });
  GenerationRequest req;
  req.prompt = {1};
  req.params.temperature = 0;
  req.params.ignore_eos = true;
  req.params.max_tokens = kLen - 1;
  ASSERT_TRUE(e.AddRequest(req).ok());
  while (e.HasWork()) {
    auto step = e.Step();
    ASSERT_TRUE(step.ok()) << step.status();
    const OccupancyReport r = e.KvReport();
    if (r.seqs.empty()) break;
    EXPECT_EQ(r.blocks_used, e.cache().layer_groups().BlocksHeld(r.seqs[0].tokens, kBs));
  }
  ASSERT_EQ(at.size(), static_cast<size_t>(kLen - 1)) << "a step at every length 1..335";
  // The memory report's kv cache line names each group's blocks beside the ledger's split of
  // the 4 MiB pool (256 blocks) at 7 sequences of 36 blocks: 7 x 21 full, 7 x 15 window, 4
  // spare. Its last stage (peak concurrency) came at the first step: 1 token.
  const MemoryReport report = e.memory_report();
  ASSERT_FALSE(report.stages().empty());
  EXPECT_EQ(report.stages().back().lines[1].note,
            "blocks in use by layer group (the ledger's split at 7 sequences): full attention 1 "
            "(147), window 32 5 (105), spare (4)");
  EXPECT_EQ(peak[0], e.ledger().kv_groups[0].blocks_per_sequence);
  EXPECT_EQ(peak[1], e.ledger().kv_groups[1].blocks_per_sequence);
  EXPECT_EQ(peak[0] + peak[1], e.ledger().blocks_per_sequence);
  EXPECT_EQ(peak[0], 21);        // ceil(335 / 16)
  EXPECT_EQ(peak[1], 5 * 3);     // WindowBlocksBound(32, 16, 1) a table
  EXPECT_EQ(at[48][1], 5 * 2);   // the query at 47 reads 16..47: blocks 1 and 2
  EXPECT_EQ(at[335][1], 5 * 3);  // the query at 334 reads 303..334: blocks 18 to 20
  for (int64_t n : {int64_t{32}, int64_t{64}, int64_t{128}, int64_t{335}}) {
    std::printf(
        "tiny-gemma3: %lld tokens, full-attention table %lld blocks, window tables %lld "
        "blocks (%llu bytes in all; %lld blocks with the windows ignored)\n",
        static_cast<long long>(n), static_cast<long long>(at[n][0]),
        static_cast<long long>(at[n][1]),
        static_cast<unsigned long long>((at[n][0] + at[n][1]) * e.cache().block_bytes()),
        static_cast<long long>(6 * ((n + kBs - 1) / kBs)));
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
