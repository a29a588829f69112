// The CPU backend's scratch is one committed workspace laid out by CpuWorkspaceLayout: what
// it allocates is what the ledger's workspace line predicts, it is allocated before the first
// step and never grows, and a step that would need more is refused naming the line.
#include "engine/cpu/cpu_workspace.h"

#include <cstdint>
#include <set>
#include <string>

#include "engine/cpu/cpu_backend.h"
#include "engine/memory/memory_ledger.h"
#include "gtest/gtest.h"
#include "tests/testing/synth_models.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

const Model& Tiny() {
  static const std::unique_ptr<Model> model = testing::SynthModel("tiny", "Q4_0");
  return *model;
}

TEST(CpuWorkspace, BuffersAreAlignedDisjointAndSizedByTheLayout) {
  ModelConfig c = Tiny().config();
  const auto layout = CpuWorkspaceLayout(c, {48, 3});
  ASSERT_EQ(layout.size(), static_cast<size_t>(CpuBuffer::kCount));
  auto ws = CpuWorkspace::Create(layout, {});
  ASSERT_TRUE(ws.ok()) << ws.status();
  EXPECT_EQ((*ws)->bytes(), LayoutBytes(layout));
  std::set<uintptr_t> starts;
  for (const CpuBufferSize& b : layout) {
    EXPECT_EQ(b.bytes_per_copy % kCpuBufferAlign, 0u) << b.name;
    for (int t = 0; t < b.copies; ++t) {
      uint8_t* p = (*ws)->Get<uint8_t>(b.buffer, t);
      ASSERT_NE(p, nullptr) << b.name;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kCpuBufferAlign, 0u) << b.name;
      EXPECT_TRUE(starts.insert(reinterpret_cast<uintptr_t>(p)).second) << b.name;
      p[b.bytes_per_copy - 1] = 1;  // the whole copy is ours
    }
    EXPECT_EQ((*ws)->Get(b.buffer, b.copies), nullptr) << b.name;
  }
  EXPECT_EQ(layout[static_cast<size_t>(CpuBuffer::kResidual)].bytes_per_copy,
            48u * c.dim * sizeof(float));
  EXPECT_EQ(layout[static_cast<size_t>(CpuBuffer::kMatMulTile)].copies, 3);
  EXPECT_EQ(layout[static_cast<size_t>(CpuBuffer::kAttentionScores)].copies, 3);
  // A MatMul-only workspace has none of the forward pass's activations.
  auto mm = CpuWorkspace::ForMatMul(256, 4, 2);
  ASSERT_TRUE(mm.ok());
  EXPECT_EQ((*mm)->Get(CpuBuffer::kResidual), nullptr);
  EXPECT_NE((*mm)->Get(CpuBuffer::kMatMulTile, 1), nullptr);
}

// What the backend commits is the ledger's workspace line (less the engine's logits rows).
TEST(CpuWorkspace, BackendAllocatesWhatTheLedgerPredicts) {
  for (auto [tokens, len, threads] : {std::tuple{64, 256, 1}, {512, 1024, 3}, {16, 17, 2}}) {
    CpuBackend b(Tiny(), tokens, threads);
    EXPECT_EQ(b.WorkspaceBytes(), 0u);  // nothing before Commit
    ASSERT_TRUE(b.ReserveForLimits(4, len, 16).ok());
    ASSERT_TRUE(b.Commit(false).ok());
    LedgerOptions o;
    o.max_num_batched_tokens = tokens;
    o.max_num_seqs = 4;
    o.threads = threads;
    uint64_t predicted = 0;
    for (const WorkspacePart& p : WorkspaceParts(Tiny().config(), o)) {
      if (p.name != "logits") predicted += p.bytes;
    }
    EXPECT_EQ(b.WorkspaceBytes(), predicted) << tokens << " " << len << " " << threads;
    EXPECT_NE(b.CommitSummary().find("workspace"), std::string::npos);
  }
}

// A KV cache of one sequence holding `n` tokens, and a batch of those tokens.
struct Step {
  std::unique_ptr<KvCache> cache;
  ForwardBatch batch;
};
Step MakeStep(int n, int first_pos = 0) {
  Step s;
  KvCacheConfig kc = KvCacheConfigFor(Tiny().config(), KvDtype::kF16);
  kc.max_model_len = 1024;
  kc.num_blocks = 1024 / 16;
  kc.prefix_caching = false;
  s.cache = *KvCache::Create(kc);
  EXPECT_TRUE(s.cache->AddSequence(0).ok());
  EXPECT_TRUE(s.cache->Append(0, first_pos + n).ok());
  for (int i = 0; i < n; ++i) s.batch.Add(1 + i % 100, first_pos + i, 0, i == n - 1);
  return s;
}

TEST(CpuWorkspace, StepsThatNeedMoreAreRefusedNamingTheLine) {
  CpuBackend b(Tiny(), 32, 2);
  std::vector<float> logits(Tiny().config().n_vocab);
  Step ok = MakeStep(8);
  absl::Status before = b.Forward(ok.batch, *ok.cache, logits.data());
  EXPECT_EQ(before.code(), absl::StatusCode::kFailedPrecondition);  // not committed yet
  ASSERT_TRUE(b.ReserveForLimits(1, 128, 16).ok());
  ASSERT_TRUE(b.Commit(false).ok());
  ASSERT_TRUE(b.Forward(ok.batch, *ok.cache, logits.data()).ok());
  const uint64_t bytes = b.WorkspaceBytes();

  Step wide = MakeStep(33);  // more tokens than max_tokens
  absl::Status s = b.Forward(wide.batch, *wide.cache, logits.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("workspace line"), std::string_view::npos) << s;
  Step deep = MakeStep(1, 900);  // a context far past the step above: same scratch
  EXPECT_TRUE(b.Forward(deep.batch, *deep.cache, logits.data()).ok());
  EXPECT_EQ(b.WorkspaceBytes(), bytes);  // nothing grew
}

}  // namespace
}  // namespace pinfer
