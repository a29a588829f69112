// Weights repacked at load (engine/cpu/repack.h) on stories260K's Q8_0 and Q4_0 copies (made
// here by QuantizeGguf): which matrices the rule picks, what the CPU backend then holds, and
// that a greedy continuation and its logits match --no-repack's (the file's layout) bit for bit.
#include "engine/cpu/repack.h"

#include <memory>
#include <string>
#include <vector>

#include "engine/convert/quantize.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/memory/model_plan.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "loaders/kernel_set.h"
#include "tests/testing/engine_helpers.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

class RepackTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
    const std::string out = testing::TempDir("repack") + "/stories-" + GetParam() + ".gguf";
    QuantizeOptions opt;
    opt.threads = 1;
    auto sum = QuantizeGguf(path, out, GetParam(), opt);
    ASSERT_TRUE(sum.ok()) << sum.status();
    auto m = Model::Load(out);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    if (PlanRepack(*model_, ActiveKernelSet()).matrices.empty()) {
      GTEST_SKIP() << "the kernel set " << KernelSetName(ActiveKernelSet())
                   << " has no packed kernels for " << GetParam();
    }
  }
  std::unique_ptr<Model> model_;
};

TEST_P(RepackTest, RuleTakesTheLayersMatricesOfPackedFormatsNotTheEmbeddings) {
  const ModelWeights& w = model_->weights();
  const RepackPlan plan = PlanRepack(*model_, ActiveKernelSet());
  uint64_t packed = 0, file = 0;
  for (const WeightMatrix* m : plan.matrices) {
    EXPECT_NE(m, &w.tok_embd);
    const PackedKernel k = PackedKernelFor(ActiveKernelSet(), m->type);
    ASSERT_NE(k.dot, nullptr) << m->name;
    packed += k.bytes(m->type, m->rows, m->cols);
    file += m->bytes();
  }
  EXPECT_EQ(plan.packed_bytes, packed);
  EXPECT_EQ(plan.file_bytes, file);
  // ffn_gate / ffn_up have 172 rows: their last group is padded to 176.
  EXPECT_GT(plan.packed_bytes, plan.file_bytes);
  // Every layer's q, k, v, o, gate, up (ffn_down's 172-wide rows fall back to a type without a
  // packed layout), and the output unless tied to tok_embd.
  size_t want = 0;
  for (const LayerWeights& l : w.layers) {
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      want += RepackableMatrix(*m, ActiveKernelSet());
    }
  }
  if (w.output.data != w.tok_embd.data) want += RepackableMatrix(w.output, ActiveKernelSet());
  EXPECT_GE(want, 6 * w.layers.size());
  EXPECT_EQ(plan.matrices.size(), want);
  // The ledger's lines count the packed bytes.
  auto in = PlanInputFromModel(*model_);
  ASSERT_TRUE(in.ok());
  const uint64_t before = in->weights_bytes();
  AccountRepack(plan, &*in);
  EXPECT_EQ(in->weights_bytes(), before - plan.file_bytes + plan.packed_bytes);
}

TEST_P(RepackTest, BackendHoldsThePackedBytesAndNoFileRangesOfThem) {
  CpuBackend cpu(*model_, 16, 2);
  ASSERT_TRUE(cpu.ReserveForLimits(1, 64, 16).ok());
  ASSERT_TRUE(cpu.Commit(false).ok());
  const WeightResidency w = cpu.Weights();
  EXPECT_EQ(w.repacked, cpu.repack_plan().packed_bytes);
  EXPECT_EQ(w.bytes - w.mapped, w.repacked);  // the rest is the file's (tok_embd, ...)
  EXPECT_NE(cpu.CommitSummary().find("repacked"), std::string::npos) << cpu.CommitSummary();
  EXPECT_NE(cpu.RepackSummary().find(KernelSetName(ActiveKernelSet())), std::string::npos);
  CpuBackend plain(*model_, 16, 2, /*repack=*/false);
  EXPECT_TRUE(plain.repack_plan().matrices.empty());
  EXPECT_EQ(plain.RepackSummary(), "file layout (--no-repack)");
}

TEST_P(RepackTest, GreedyTextAndLogitsMatchTheFileLayout) {
  const std::vector<int32_t> prompt =
      model_->tokenizer().Encode("Once upon a time, there was a little girl named Lily.", true);
  EngineConfig on = testing::SmallConfig(), off = on;
  off.repack = false;
  std::vector<float> logits_on, logits_off;
  auto a = testing::GreedyTokens(*model_, on, prompt, 48, nullptr, &logits_on);
  auto b = testing::GreedyTokens(*model_, off, prompt, 48, nullptr, &logits_off);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(*a, *b) << GetParam();
  ASSERT_EQ(logits_on.size(), logits_off.size());
  EXPECT_EQ(logits_on, logits_off);  // bit for bit: the same per-block order
}

INSTANTIATE_TEST_SUITE_P(Types, RepackTest, ::testing::Values("Q8_0", "Q4_0"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace pinfer
