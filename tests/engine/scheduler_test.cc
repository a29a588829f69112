// The scheduler under pressure: many requests against a pool that holds only a few at a time.
#include <map>
#include <random>

#include "engine/engine.h"
#include "engine/model/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_helpers.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using ::testing::HasSubstr;

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }
  std::vector<int32_t> Prompt(int len, int variant) const {
    // BOS, then story tokens; variants share their first tokens (prefix-cache hits).
    std::vector<int32_t> p = model_->tokenizer().Encode(
        "Once upon a time, there was a little girl named Lily. She "
        "loved to play outside in the park with her red ball and her "
        "friend Tom, who was kind and funny.",
        true);
    p.resize(std::min<size_t>(p.size(), static_cast<size_t>(len)));
    if (variant % 3 == 1) p.back() = 300 + variant;  // diverge at the end
    return p;
  }
  // 48 varied requests through a 40-block pool: every block comes back, and each output
  // equals the request run alone (greedy). Returns the preemptions it took.
  int64_t RunFortyEight(int admission_headroom) {
    EngineConfig cfg = testing::SmallConfig(KvDtype::kF32);
    cfg.max_num_seqs = 16;
    cfg.max_num_batched_tokens = 64;
    cfg.block_size = 16;
    cfg.max_model_len = 256;
    cfg.admission_headroom = admission_headroom;
    // 1280 bytes per token at f32: 40 blocks of 16 tokens, far less than 48 requests need.
    cfg.kv_cache_memory = 40ull * 16 * 1280;
    auto engine = Engine::Create(*model_, cfg, nullptr, true);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return -1;
    Engine& e = **engine;
    EXPECT_EQ(e.cache().num_blocks(), 40);

    std::mt19937 rng(7);
    std::map<int64_t, std::pair<std::vector<int32_t>, int>> requests;  // id -> prompt, max_tokens
    for (int i = 0; i < 48; ++i) {
      const int len = 2 + static_cast<int>(rng() % 30);
      const int max_tokens = 8 + static_cast<int>(rng() % 90);
      GenerationRequest req;
      req.prompt = Prompt(len, i);
      req.params.temperature = 0;
      req.params.max_tokens = max_tokens;
      req.params.ignore_eos = true;
      auto id = e.AddRequest(req);
      EXPECT_TRUE(id.ok()) << id.status();
      if (!id.ok()) return -1;
      requests[*id] = {req.prompt, max_tokens};
    }
    std::map<int64_t, std::vector<int32_t>> outputs;
    int finished = 0;
    while (e.HasWork()) {
      auto step = e.Step();
      EXPECT_TRUE(step.ok()) << step.status();
      if (!step.ok()) return -1;
      for (const SequenceOutput& o : *step) {
        auto& out = outputs[o.request_id];
        out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
        finished += o.finished;
      }
      EXPECT_LE(e.KvReport().blocks_used, 40);
    }
    EXPECT_EQ(finished, 48);
    EXPECT_LE(e.stats().max_running, 16);
    const OccupancyReport end = e.KvReport();
    EXPECT_EQ(end.blocks_used, 0);
    EXPECT_EQ(end.blocks_free + end.blocks_cached, 40);

    for (const auto& [id, req] : requests) {
      auto want = testing::GreedyTokens(*model_, testing::SmallConfig(), req.first, req.second);
      EXPECT_TRUE(want.ok()) << want.status();
      if (!want.ok()) return -1;
      // ignore_eos was set above; alone runs stop at EOS, so compare the common prefix length.
      const auto& got = outputs[id];
      EXPECT_GE(got.size(), want->size());
      if (got.size() < want->size()) continue;
      EXPECT_TRUE(std::equal(want->begin(), want->end(), got.begin())) << "request " << id;
    }
    return e.stats().preemptions;
  }
  std::unique_ptr<Model> model_;
};

TEST_F(SchedulerTest, FortyEightRequestsThroughASmallPoolMatchRunningAlone) {
  // Without headroom the scheduler admits on the prompt alone and must preempt.
  const int64_t greedy = RunFortyEight(0);
  EXPECT_GT(greedy, 0) << "the pool was meant to force preemptions";
  // Keeping room for the running sequences' growth preempts less, with the same outputs.
  const int64_t headroom = RunFortyEight(64);
  EXPECT_GE(headroom, 0);
  EXPECT_LT(headroom, greedy);
}

TEST_F(SchedulerTest, NegativeAdmissionHeadroomIsRefused) {
  EngineConfig cfg = testing::SmallConfig();
  cfg.admission_headroom = -1;
  auto e = Engine::Create(*model_, cfg, nullptr, true);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("admission_headroom"));
}

TEST_F(SchedulerTest, RefusesPromptPlusMaxTokensBeyondMaxModelLen) {
  EngineConfig cfg = testing::SmallConfig();
  cfg.max_model_len = 64;
  auto e = Engine::Create(*model_, cfg, nullptr, true);
  ASSERT_TRUE(e.ok()) << e.status();
  GenerationRequest req;
  req.prompt = Prompt(20, 0);
  req.params.max_tokens = 50;
  auto id = (*e)->AddRequest(req);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("exceed max_model_len 64"));
}

TEST_F(SchedulerTest, RefusesToStartWhenOneSequenceCannotFit) {
  EngineConfig cfg = testing::SmallConfig();
  cfg.max_model_len = 2048;
  cfg.kv_cache_memory = 100 * 1280;  // 100 tokens of f32 KV
  auto e = Engine::Create(*model_, cfg, nullptr, true);
  ASSERT_FALSE(e.ok());
  const std::string msg(e.status().message());
  EXPECT_THAT(msg, HasSubstr("refusing to start"));
  EXPECT_THAT(msg, HasSubstr("max_model_len"));
}

TEST_F(SchedulerTest, CancelFreesBlocks) {
  auto e = Engine::Create(*model_, testing::SmallConfig(), nullptr, true);
  ASSERT_TRUE(e.ok()) << e.status();
  GenerationRequest req;
  req.prompt = Prompt(30, 0);
  req.params.max_tokens = 100;
  auto id = (*e)->AddRequest(req);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE((*e)->Step().ok());
  EXPECT_GT((*e)->KvReport().blocks_used, 0);
  EXPECT_TRUE((*e)->Cancel(*id));
  EXPECT_EQ((*e)->KvReport().blocks_used, 0);
  EXPECT_FALSE((*e)->HasWork());
}

TEST_F(SchedulerTest, ForkedCompletionsShareThePromptBlocks) {
  auto e = Engine::Create(*model_, testing::SmallConfig(), nullptr, true);
  ASSERT_TRUE(e.ok()) << e.status();
  GenerationRequest req;
  req.prompt = Prompt(33, 0);
  req.params.temperature = 1.0f;
  req.params.max_tokens = 20;
  req.params.ignore_eos = true;
  req.n = 3;
  ASSERT_TRUE((*e)->AddRequest(req).ok());
  std::map<int, int> tokens_per_index;
  bool checked_sharing = false;
  while ((*e)->HasWork()) {
    auto step = (*e)->Step();
    ASSERT_TRUE(step.ok()) << step.status();
    for (const SequenceOutput& o : *step) tokens_per_index[o.index] += (int)o.new_tokens.size();
    const OccupancyReport r = (*e)->KvReport();
    if (!checked_sharing && r.seqs.size() == 3) {
      // Three sequences of 33+ tokens each, but the prompt's two full blocks are shared.
      int64_t per_seq_blocks = 0;
      for (const SeqOccupancy& s : r.seqs) per_seq_blocks += s.blocks;
      EXPECT_LT(r.blocks_used, per_seq_blocks);
      checked_sharing = true;
    }
  }
  EXPECT_TRUE(checked_sharing);
  EXPECT_EQ(tokens_per_index.size(), 3u);
  for (auto [index, n] : tokens_per_index) EXPECT_EQ(n, 20) << "completion " << index;
  EXPECT_EQ((*e)->KvReport().blocks_used, 0);
}

TEST_F(SchedulerTest, StopStringEndsGenerationAndIsNotEmitted) {
  auto e = Engine::Create(*model_, testing::SmallConfig(), nullptr, true);
  ASSERT_TRUE(e.ok()) << e.status();
  GenerationRequest req;
  req.prompt = {1};
  req.params.temperature = 0;
  req.params.max_tokens = 200;
  req.params.stop = {"Lily"};
  ASSERT_TRUE((*e)->AddRequest(req).ok());
  std::string text;
  FinishReason reason = FinishReason::kNone;
  while ((*e)->HasWork()) {
    auto step = (*e)->Step();
    ASSERT_TRUE(step.ok());
    for (const SequenceOutput& o : *step) {
      text += o.new_text;
      if (o.finished) reason = o.reason;
    }
  }
  EXPECT_EQ(text, "Once upon a time, there was a little girl named ");
  EXPECT_EQ(reason, FinishReason::kStop);
}

}  // namespace
}  // namespace pinfer
