// GPTQ / AWQ 4-bit folders built here from known weights (packed by tests/testing/hf_folders)
// load as Q4_1 and give the logits of the same model built from the dequantized floats.
#include <memory>
#include <string>
#include <vector>

#include "engine/convert/gguf_export.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_helpers.h"
#include "tests/testing/hf_folders.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using testing::PackKind;

struct Case {
  const char* name;
  PackKind kind;
  int group_size;
};

class HfPacked : public ::testing::TestWithParam<Case> {};

// The logits after the prompt with the CPU backend on its float path (MatMulOptions::
// float_activations): the comparisons below are at float32 rounding, and the default 8-bit
// activations of the integer kernels (Q4_0 .. Q8_0, engine/cpu/matmul.h) move these tiny
// models' logits by about 1e-2 relative L2 (measured 1.1e-2 to 2.4e-2), which
// quantized_copy_test and perplexity_test bound instead.
absl::StatusOr<std::vector<float>> FloatPathLogits(const Model& m, EngineConfig cfg,
                                                   std::vector<int32_t> prompt) {
  auto cpu = std::make_unique<CpuBackend>(m, cfg.max_num_batched_tokens, cfg.threads);
  cpu->set_matmul_options({.float_activations = true});
  std::vector<float> logits;
  auto tokens = testing::GreedyTokens(m, cfg, std::move(prompt), 1, std::move(cpu), &logits);
  if (!tokens.ok()) return tokens.status();
  return logits;
}

// Q4_1 stores m = fp16(-zero * scale): each weight can move by up to |zero * scale| * 2^-12
// (a few 1e-4 of its value); through two layers the logits agree to about 1.2e-3 relative L2
// (measured 0.4e-3 to 1.24e-3 over these cases), so 3e-3 with the same argmax.
constexpr double kTolerance = 3e-3;

TEST_P(HfPacked, LogitsMatchDequantizedFloatModel) {
  const Case& c = GetParam();
  const ModelConfig config = testing::TinyHfConfig();
  testing::FloatTensors weights = testing::RandomTinyWeights(config, 7);
  const std::string packed = testing::TempDir(std::string("hf-packed-") + c.name);
  const std::string plain = testing::TempDir(std::string("hf-deq-") + c.name);
  ASSERT_TRUE(testing::WritePackedFolder(packed, config, weights, c.kind, c.group_size, 11).ok());
  ASSERT_TRUE(testing::WriteFloatFolder(plain, config, weights).ok());
  auto q = Model::Load(packed);
  ASSERT_TRUE(q.ok()) << q.status();
  auto f = Model::Load(plain);
  ASSERT_TRUE(f.ok()) << f.status();
  const WeightMatrix& wq = (*q)->weights().layers[0].wq;
  EXPECT_EQ(wq.type, GgmlType::kQ4_1);
  // ffn_down has 128 inputs, so even at group 64 act-order leaves a real permutation.
  const WeightMatrix& down = (*q)->weights().layers[0].w_down;
  EXPECT_EQ(down.input_perm.empty(), c.kind != PackKind::kGptqActOrder);
  EXPECT_NE((*q)->source_format().find("repacked to Q4_1"), std::string::npos);
  const std::vector<int32_t> prompt = {1, 300, 17, 42, 260, 5};
  auto lq = FloatPathLogits(**q, testing::SmallConfig(), prompt);
  auto lf = FloatPathLogits(**f, testing::SmallConfig(), prompt);
  ASSERT_TRUE(lq.ok() && lf.ok());
  const testing::Diff d = testing::Compare(*lq, *lf);
  EXPECT_LE(d.rel_l2, kTolerance) << "max abs " << d.max_abs;
  EXPECT_EQ(testing::Argmax(*lq), testing::Argmax(*lf));

  // Converted to GGUF (act-order undone, rows permuted for RoPE), F32: the same logits.
  auto ft = ParseFileType("F32");
  ASSERT_TRUE(WriteModelAsGguf(**q, *ft, packed + "/out.gguf").ok());
  auto g = Model::Load(packed + "/out.gguf");
  ASSERT_TRUE(g.ok()) << g.status();
  auto lg = FloatPathLogits(**g, testing::SmallConfig(), prompt);
  ASSERT_TRUE(lg.ok());
  EXPECT_LE(testing::Compare(*lg, *lq).rel_l2, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Packings, HfPacked,
                         ::testing::Values(Case{"gptq_g32", PackKind::kGptq, 32},
                                           Case{"gptq_g64", PackKind::kGptq, 64},
                                           Case{"gptq_actorder_g32", PackKind::kGptqActOrder, 32},
                                           Case{"gptq_actorder_g64", PackKind::kGptqActOrder, 64},
                                           Case{"awq_g32", PackKind::kAwq, 32},
                                           Case{"awq_g64", PackKind::kAwq, 64}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace pinfer
