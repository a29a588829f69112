// Hugging Face folders through the same kernels, cache and ledger: stories260K exported to a
// folder and back, converted to GGUF again, and the tiny-random-llama fixtures.
#include <string>

#include "engine/convert/gguf_export.h"
#include "engine/convert/hf_export.h"
#include "engine/cpu/matmul.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "loaders/quants.h"
#include "tests/testing/engine_helpers.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using testing::Compare;
using testing::PromptLogits;
using testing::SmallConfig;

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378};

std::unique_ptr<Model> MustLoad(const std::string& path) {
  auto m = Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

// Relative L2 error of the logits after `prompt`.
double LogitsRelDiff(const Model& a, const Model& b, const std::vector<int32_t>& prompt) {
  auto la = PromptLogits(a, SmallConfig(), prompt);
  auto lb = PromptLogits(b, SmallConfig(), prompt);
  EXPECT_TRUE(la.ok() && lb.ok());
  if (!la.ok() || !lb.ok()) return 1e9;
  return Compare(*la, *lb).rel_l2;
}

TEST(HfModel, Stories260KExportedToHfFolderAndBackGivesSameLogits) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto gguf = MustLoad(path);
  ASSERT_NE(gguf, nullptr);
  const std::string dir = testing::TempDir("hf-stories");
  ASSERT_TRUE(WriteHfFolder(*gguf, dir).ok());
  auto hf = MustLoad(dir);
  ASSERT_NE(hf, nullptr);
  EXPECT_EQ(hf->config().rope_style, RopeStyle::kHalves);
  EXPECT_EQ(hf->source_format(), "safetensors");
  EXPECT_EQ(hf->stored_tensors().size(), gguf->stored_tensors().size());
  EXPECT_LE(LogitsRelDiff(*gguf, *hf, kPrompt), 1e-5);
  EXPECT_LE(LogitsRelDiff(*gguf, *hf, {1}), 1e-5);
  // The tokenizer survives as tokenizer.json (merges made from the scores).
  for (const char* text : {"Once upon a time", "Lily", "Hello world"}) {
    EXPECT_EQ(hf->tokenizer().Encode(text, true), gguf->tokenizer().Encode(text, true)) << text;
  }

  // convert: the folder back to GGUF (q/k rows permuted to adjacent pairs).
  const std::string out = dir + "/back.gguf";
  auto ft = ParseFileType("F32");
  ASSERT_TRUE(ft.ok());
  ASSERT_TRUE(WriteModelAsGguf(*hf, *ft, out).ok());
  auto again = MustLoad(out);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->config().rope_style, RopeStyle::kAdjacentPairs);
  EXPECT_LE(LogitsRelDiff(*gguf, *again, kPrompt), 1e-5);
  EXPECT_EQ(again->tokenizer().Encode("Once upon a time", true), kPrompt);
  // The permutation is the only thing making these agree: the raw q rows differ.
  std::vector<float> hf_row(64), gguf_row(64);
  DequantizeRow(GgmlType::kF32, hf->weights().layers[0].wq.row(1), hf_row.data(), 64);
  DequantizeRow(GgmlType::kF32, gguf->weights().layers[0].wq.row(1), gguf_row.data(), 64);
  EXPECT_NE(hf_row, gguf_row);
}

TEST(HfModel, Stories260KConvertsToQ8_0Close) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto gguf = MustLoad(path);
  ASSERT_NE(gguf, nullptr);
  const std::string dir = testing::TempDir("hf-stories-q8");
  ASSERT_TRUE(WriteHfFolder(*gguf, dir, StDtype::kF16).ok());
  auto hf = MustLoad(dir);
  ASSERT_NE(hf, nullptr);
  EXPECT_LE(LogitsRelDiff(*gguf, *hf, kPrompt), 2e-3);  // F16 weights
  auto ft = ParseFileType("Q8_0");
  ASSERT_TRUE(ft.ok());
  ASSERT_TRUE(WriteModelAsGguf(*hf, *ft, dir + "/q8.gguf").ok());
  auto q8 = MustLoad(dir + "/q8.gguf");
  ASSERT_NE(q8, nullptr);
  EXPECT_EQ(q8->WeightFormat().rfind("Q8_0", 0), 0u) << q8->WeightFormat();
  EXPECT_LE(LogitsRelDiff(*gguf, *q8, kPrompt), 2e-2);
}

TEST(HfModel, TinyRandomLlamaF32LoadsTokenizesAndRuns) {
  PINFER_REQUIRE_MODEL(path, "hf/tiny-random-llama-f32");
  auto m = MustLoad(path);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->config().n_vocab, 32000);
  EXPECT_EQ(m->config().dim, 16);
  EXPECT_EQ(m->tokenizer().Encode("Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
  // config.json says eos 1 (which is <s>): not taken as an end-of-generation id.
  EXPECT_FALSE(m->tokenizer().IsEndOfGeneration(1));
  EXPECT_TRUE(m->tokenizer().IsEndOfGeneration(2));
  auto out = testing::GreedyTokens(*m, SmallConfig(), {1, 15043, 3186}, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->size(), 4u);
  EXPECT_EQ(m->stored_tensors().size(), 21u);
}

TEST(HfModel, TinyRandomLlamaF16ShardedMatchesF32) {
  PINFER_REQUIRE_MODEL(f32, "hf/tiny-random-llama-f32");
  PINFER_REQUIRE_MODEL(f16, "hf/tiny-random-llama-f16-sharded");
  auto a = MustLoad(f32);
  auto b = MustLoad(f16);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->weights().layers[0].wq.type, GgmlType::kF16);
  // F16 rounding of std-0.02 weights: relative error about 2^-11 per weight.
  EXPECT_LE(LogitsRelDiff(*a, *b, {1, 15043, 3186}), 1e-2);
  // And the folder converted to GGUF runs the same.
  auto ft = ParseFileType("F32");
  const std::string out = testing::TempDir("hf-tiny") + "/tiny.gguf";
  ASSERT_TRUE(WriteModelAsGguf(*b, *ft, out).ok());
  auto c = MustLoad(out);
  ASSERT_NE(c, nullptr);
  EXPECT_LE(LogitsRelDiff(*b, *c, {1, 15043, 3186}), 1e-5);
  EXPECT_EQ(c->tokenizer().Encode("Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
}

TEST(HfModel, MatMulAppliesInputPermutationBatchInvariantly) {
  const int64_t rows = 20, cols = 64;
  std::vector<float> w(rows * cols), x(3 * cols);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37) % 17) / 8.0f - 1.0f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 11) % 13) / 6.0f - 1.0f;
  WeightMatrix m =
      MatrixView("w", GgmlType::kF32, rows, cols, reinterpret_cast<const uint8_t*>(w.data()));
  for (int64_t k = 0; k < cols; ++k) m.input_perm.push_back(static_cast<int32_t>((k * 5) % cols));
  ThreadPool pool(3);
  auto ws = CpuWorkspace::ForMatMul(cols, 3, pool.size());
  ASSERT_TRUE(ws.ok()) << ws.status();
  std::vector<float> y(3 * rows), y1(rows);
  ASSERT_TRUE(MatMul(m, x.data(), 3, y.data(), pool, **ws).ok());
  for (int t = 0; t < 3; ++t) {
    ASSERT_TRUE(MatMul(m, x.data() + t * cols, 1, y1.data(), pool, **ws).ok());
    for (int64_t r = 0; r < rows; ++r) {
      double want = 0;
      for (int64_t k = 0; k < cols; ++k) want += w[r * cols + k] * x[t * cols + m.input_perm[k]];
      EXPECT_NEAR(y[t * rows + r], want, 1e-4);
      EXPECT_EQ(y[t * rows + r], y1[r]);  // bit-identical alone or batched
    }
  }
}

}  // namespace
}  // namespace pinfer
