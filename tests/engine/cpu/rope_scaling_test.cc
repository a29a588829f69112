// RoPE scaling: Llama 3.1's per-pair frequency factors (from config.json's rope_scaling or a
// GGUF rope_freqs.weight tensor) and linear scaling, as llama.cpp applies them.
#include <cstring>
#include <string>
#include <vector>

#include "engine/convert/hf_export.h"
#include "engine/cpu/ops.h"
#include "engine/model/hf_config.h"
#include "engine/model/model.h"
#include "engine/model/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loaders/gguf.h"
#include "tests/testing/engine_helpers.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using ::testing::HasSubstr;

// Llama 3.1 8B's rope_scaling: theta 500000, head_dim 128, factor 8, low 1, high 4, 8192.
std::vector<float> Llama31Factors() { return Llama3RopeFactors(500000.0f, 128, 8, 1, 4, 8192); }

TEST(Llama3RopeFactors, KeepHighFrequenciesScaleLowOnesAndBlendBetween) {
  const std::vector<float> f = Llama31Factors();
  ASSERT_EQ(f.size(), 64u);
  // Pair i has wavelength 2 pi 500000^(i/64): under 8192/4 = 2048 for i <= 28, over 8192 for
  // i >= 35 (worked out by hand from the formula's thresholds).
  for (int i = 0; i <= 28; ++i) EXPECT_EQ(f[i], 1.0f) << i;
  for (int i = 35; i < 64; ++i) EXPECT_EQ(f[i], 8.0f) << i;
  for (int i = 29; i <= 34; ++i) {
    EXPECT_GT(f[i], f[i - 1]) << i;
    EXPECT_LT(f[i], 8.0f) << i;
  }
  // i = 32: wavelength 2 pi sqrt(500000) = 4442.88, smooth = (8192 / 4442.88 - 1) / 3 =
  // 0.281289, factor = 1 / ((1 - smooth) / 8 + smooth) = 2.69449 (computed by hand).
  EXPECT_NEAR(f[32], 2.69449f, 2e-4f);
}

std::vector<float> RandomHeads(int heads, int head_dim) {
  std::vector<float> v(static_cast<size_t>(heads * head_dim));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f + 0.25f * static_cast<float>(i % 7) - 0.1f * i;
  return v;
}

TEST(ApplyRope, UnitFactorsAndScaleChangeNothing) {
  for (RopeStyle style : {RopeStyle::kAdjacentPairs, RopeStyle::kHalves}) {
    std::vector<float> a = RandomHeads(4, 16), b = a;
    const std::vector<float> ones(8, 1.0f);
    ApplyRope(a.data(), 4, 16, 37, 10000.0f, style);
    ApplyRope(b.data(), 4, 16, 37, 10000.0f, style, 1.0f, ones.data());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  }
}

TEST(ApplyRope, ScalingIsAPositionStretch) {
  // Halving every angle (freq_scale 0.5, or every factor 2) at position 2p is exactly the
  // unscaled rotation at p: the products differ by exact powers of two.
  for (RopeStyle style : {RopeStyle::kAdjacentPairs, RopeStyle::kHalves}) {
    const std::vector<float> twos(8, 2.0f);
    std::vector<float> want = RandomHeads(2, 16), linear = want, factors = want;
    ApplyRope(want.data(), 2, 16, 21, 10000.0f, style);
    ApplyRope(linear.data(), 2, 16, 42, 10000.0f, style, 0.5f);
    ApplyRope(factors.data(), 2, 16, 42, 10000.0f, style, 1.0f, twos.data());
    EXPECT_EQ(0, std::memcmp(want.data(), linear.data(), want.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(want.data(), factors.data(), want.size() * sizeof(float)));
  }
}

std::string HfJson(const std::string& rope_scaling) {
  return R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
             "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 8, "vocab_size": 128256, "rope_theta": 500000.0,
             "rope_scaling": )" +
         rope_scaling + "}";
}

TEST(HfConfigRopeScaling, Llama3LinearAndRefusals) {
  auto llama3 = ParseHfConfig(HfJson(R"({"factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
      "rope_type": "llama3"})"),
                              "config.json");
  ASSERT_TRUE(llama3.ok()) << llama3.status();
  EXPECT_EQ(llama3->model.rope_freq_factors, Llama31Factors());
  EXPECT_EQ(llama3->model.rope_freq_scale, 1.0f);

  auto linear = ParseHfConfig(HfJson(R"({"type": "linear", "factor": 4.0})"), "config.json");
  ASSERT_TRUE(linear.ok()) << linear.status();
  EXPECT_EQ(linear->model.rope_freq_scale, 0.25f);
  EXPECT_TRUE(linear->model.rope_freq_factors.empty());

  auto yarn = ParseHfConfig(HfJson(R"({"rope_type": "yarn", "factor": 4.0})"), "config.json");
  ASSERT_FALSE(yarn.ok());
  EXPECT_THAT(yarn.status().message(), HasSubstr("'yarn' is not supported"));
  auto missing = ParseHfConfig(HfJson(R"({"rope_type": "llama3", "factor": 8.0})"), "cfg");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("low_freq_factor"));
  auto negative = ParseHfConfig(HfJson(R"({"type": "linear", "factor": -2})"), "cfg");
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(), HasSubstr("positive"));
}

// stories260K rewritten with extra metadata and, when given, a rope_freqs.weight tensor.
std::string RewriteStories(const std::string& src, const std::string& tag,
                           const std::vector<std::pair<std::string, GgufValue>>& keys,
                           const std::vector<float>& factors) {
  auto file = GgufFile::Open(src);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return "";
  GgufWriter w;
  for (const GgufKV& kv : (*file)->metadata()) w.Set(kv.key, kv.value);
  for (const auto& [key, value] : keys) w.Set(key, value);
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    const uint8_t* p = (*file)->data(t);
    EXPECT_TRUE(w.AddTensor(t.name, t.type, t.dims, std::vector<uint8_t>(p, p + t.nbytes)).ok());
  }
  if (!factors.empty()) {
    std::vector<uint8_t> bytes(factors.size() * sizeof(float));
    std::memcpy(bytes.data(), factors.data(), bytes.size());
    EXPECT_TRUE(w.AddTensor("rope_freqs.weight", GgmlType::kF32,
                            {static_cast<int64_t>(factors.size())}, std::move(bytes))
                    .ok());
  }
  const std::string out = testing::TempDir("rope_" + tag) + "/model.gguf";
  EXPECT_TRUE(w.WriteFile(out).ok());
  return out;
}

std::vector<float> Logits(const std::string& path) {
  auto m = Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  auto l = testing::PromptLogits(**m, testing::SmallConfig(), {1, 403, 407, 261, 378, 300, 290});
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *l : std::vector<float>{};
}

TEST(GgufRopeScaling, FactorsAndLinearScaleReachTheForwardPass) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  const std::vector<float> base = Logits(path);
  ASSERT_FALSE(base.empty());
  // Factors of 1 are the unscaled model, bit for bit.
  const std::string ones = RewriteStories(path, "ones", {}, {1, 1, 1, 1});
  auto m = Model::Load(ones);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->config().rope_freq_factors, (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(Logits(ones), base);
  // Other factors and a linear scale are read and change the logits.
  const std::string scaled = RewriteStories(path, "scaled", {}, {1, 1, 2, 8});
  EXPECT_NE(Logits(scaled), base);
  const std::string linear = RewriteStories(path, "linear",
                                            {{"llama.rope.scaling.type", GgufValue::Str("linear")},
                                             {"llama.rope.scaling.factor", GgufValue::F32(2.0f)}},
                                            {});
  auto lm = Model::Load(linear);
  ASSERT_TRUE(lm.ok()) << lm.status();
  EXPECT_EQ((*lm)->config().rope_freq_scale, 0.5f);
  EXPECT_NE(Logits(linear), base);
  // A model with per-pair factors cannot be written as a Hugging Face folder faithfully.
  auto sm = Model::Load(scaled);
  ASSERT_TRUE(sm.ok());
  absl::Status hf = WriteHfFolder(**sm, testing::TempDir("rope_hf"), StDtype::kF32);
  ASSERT_FALSE(hf.ok());
  EXPECT_THAT(hf.message(), HasSubstr("rope_freqs.weight"));
}

TEST(GgufRopeScaling, UnsupportedOrMalformedScalingIsRefused) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto yarn = Model::Load(
      RewriteStories(path, "yarn", {{"llama.rope.scaling.type", GgufValue::Str("yarn")}}, {}));
  ASSERT_FALSE(yarn.ok());
  EXPECT_THAT(yarn.status().message(), HasSubstr("yarn"));
  auto short_factors = Model::Load(RewriteStories(path, "short", {}, {1, 2}));
  ASSERT_FALSE(short_factors.ok());
  EXPECT_THAT(short_factors.status().message(), HasSubstr("rope_freqs.weight"));
  auto zero = Model::Load(RewriteStories(path, "zero", {}, {1, 0, 1, 1}));
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("must be positive"));
}

}  // namespace
}  // namespace pinfer
