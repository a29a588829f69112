// Architectures from GGUF metadata as llama.cpp writes and defaults it: every named shape's
// config survives SetHyperParameters -> ModelConfigFromGguf; gemma2's defaults when the file
// states nothing; window patterns as a period or one bool per layer; LongRoPE phi3 files and
// unknown architectures refused by name; config.json of each Hugging Face class.
#include "engine/model/architecture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/model/hf_config.h"
#include "engine/model/model_shapes.h"
#include "loaders/gguf.h"
#include "tests/testing/synth_models.h"

namespace pinfer {
namespace {

using ::testing::HasSubstr;

// A GGUF image holding c's metadata and tensors of the right shapes (zeros), plus `extra`
// keys (set after the config's own, so they replace them).
// Keys whose name contains `drop` (when not empty) are left out.
std::unique_ptr<GgufFile> FileOf(const ModelConfig& c,
                                 const std::vector<std::pair<std::string, GgufValue>>& extra = {},
                                 const std::string& drop = "") {
  GgufWriter all;
  all.SetString("general.architecture", c.arch);
  SetHyperParameters(c, &all);
  for (const auto& [key, value] : extra) all.Set(key, value);
  absl::StatusOr<std::vector<uint8_t>> meta = all.WriteToBytes();
  EXPECT_TRUE(meta.ok()) << meta.status();
  absl::StatusOr<std::unique_ptr<GgufFile>> m = GgufFile::FromBytes(std::move(*meta));
  EXPECT_TRUE(m.ok()) << m.status();
  GgufWriter w;
  for (const GgufKV& kv : (*m)->metadata()) {
    if (drop.empty() || kv.key.find(drop) == std::string::npos) w.Set(kv.key, kv.value);
  }
  for (const TensorPlan& t : PlanTensors(c, FileType{"F32", GgmlType::kF32, false})) {
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    EXPECT_TRUE(w.AddTensor(t.name, t.type, t.dims, std::vector<uint8_t>(n * 4, 0)).ok());
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = w.WriteToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(std::move(*bytes));
  EXPECT_TRUE(f.ok()) << f.status();
  return std::move(*f);
}

ModelConfig Small(const std::string& arch) {
  ModelConfig c;
  EXPECT_TRUE(SetArchitecture(arch, &c).ok());
  c.n_vocab = 64;
  c.dim = 32;
  c.n_ff = 64;
  c.n_layers = 6;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.context_length = 256;
  return c;
}

TEST(ArchitectureTest, EveryTinyShapeSurvivesTheGgufKeys) {
  for (const std::string& name : NamedShapeNames()) {
    if (name.rfind("tiny", 0) != 0) continue;  // the published ones are too large to write
    SCOPED_TRACE(name);
    const ModelConfig want = *NamedShape(name);
    absl::StatusOr<ModelConfig> got = ModelConfigFromGguf(*FileOf(want));
    ASSERT_TRUE(got.ok()) << got.status();
    testing::ExpectSameArchitecture(*got, want);
    EXPECT_EQ(got->rope_style, want.rope_style);
  }
}

TEST(ArchitectureTest, PublishedShapesHaveTheirFeatures) {
  const ModelConfig g = *NamedShape("gemma3-12b");
  EXPECT_EQ(g.n_window_layers(), 40);  // 48 layers, every sixth full
  EXPECT_EQ(g.max_window(), 1024);
  EXPECT_EQ(g.layer(0).rope_theta, 10000.0f);
  EXPECT_EQ(g.layer(0).rope_freq_scale, 1.0f);
  EXPECT_EQ(g.layer(5).window, 0);
  EXPECT_EQ(g.layer(5).rope_theta, 1e6f);
  EXPECT_EQ(g.layer(5).rope_freq_scale, 0.125f);
  EXPECT_FLOAT_EQ(g.query_scale, 1.0f / 16.0f);  // query_pre_attn_scalar 256
  EXPECT_TRUE(g.tied_embeddings && g.qk_norm && g.post_norms && g.scale_embeddings);
  const ModelConfig m = *NamedShape("mistral-7b-v0.1");
  EXPECT_EQ(m.n_window_layers(), 32);
  EXPECT_EQ(m.max_window(), 4096);
  EXPECT_FALSE(NamedShape("mistral-7b")->has_sliding_window());
  const ModelConfig p = *NamedShape("phi3-mini");
  EXPECT_EQ(p.head_dim, 96);
  EXPECT_EQ(p.max_window(), 2047);
  EXPECT_TRUE(NamedShape("qwen3-8b")->qk_norm);
  EXPECT_THAT(DescribeFeatures(g), HasSubstr("sliding window 1024 on 40 of 48 layers"));
  EXPECT_EQ(DescribeFeatures(*NamedShape("llama2-7b")), "");
}

TEST(ArchitectureTest, Gemma2DefaultsAsLlamaCppWhenTheFileStatesNone) {
  // A gemma2 file with no soft-capping or window keys: llama.cpp's defaults (50, 30, a 4096
  // window on even layers, q scaled by 1/sqrt(head_dim)).
  absl::StatusOr<ModelConfig> got =
      ModelConfigFromGguf(*FileOf(Small("gemma2"), {}, "softcapping"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->attn_softcap, 50.0f);
  EXPECT_EQ(got->final_softcap, 30.0f);
  EXPECT_EQ(got->n_window_layers(), 3);
  EXPECT_EQ(got->layer(0).window, 4096);
  EXPECT_EQ(got->layer(1).window, 0);
  EXPECT_FLOAT_EQ(got->query_scale, 1.0f / std::sqrt(8.0f));
  EXPECT_TRUE(got->tied_embeddings);
}

TEST(ArchitectureTest, WindowPatternAsOneBoolPerLayer) {
  ModelConfig c = Small("gemma3");
  std::vector<GgufValue> flags;
  for (bool b : {true, false, true, true, false, false}) flags.push_back(GgufValue::Bool(b));
  absl::StatusOr<ModelConfig> got = ModelConfigFromGguf(*FileOf(
      c, {{"gemma3.attention.sliding_window", GgufValue::U32(16)},
          {"gemma3.attention.sliding_window_pattern", GgufValue::Array(GgufType::kBool, flags)}}));
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<int> windows;
  for (int l = 0; l < 6; ++l) windows.push_back(got->layer(l).window);
  EXPECT_EQ(windows, (std::vector<int>{16, 0, 16, 16, 0, 0}));
  EXPECT_EQ(got->layer(0).rope_theta, 10000.0f);  // gemma3's window-layer base by default
  EXPECT_EQ(SlidingWindowPeriod(*got), -1);
  // Written back as the same bools.
  absl::StatusOr<ModelConfig> again = ModelConfigFromGguf(*FileOf(*got));
  ASSERT_TRUE(again.ok()) << again.status();
  testing::ExpectSameArchitecture(*again, *got);
}

TEST(ArchitectureTest, RefusalsNameWhatIsWrong) {
  ModelConfig c = Small("llama");
  c.arch = "mamba";
  absl::StatusOr<ModelConfig> got = ModelConfigFromGguf(*FileOf(c));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("'mamba' is not supported; this engine runs llama (Llama 2/3, Mistral, "
                        "TinyLlama), qwen2, qwen3, gemma2, gemma3, phi3"));
  ModelConfig g = Small("gemma2");
  got = ModelConfigFromGguf(*FileOf(g, {{"gemma2.attn_logit_softcapping", GgufValue::F32(-1.0f)}}));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("gemma2.attn_logit_softcapping"));
  got = ModelConfigFromGguf(
      *FileOf(Small("gemma3"), {{"gemma3.attention.sliding_window", GgufValue::U32(8)},
                                {"gemma3.attention.sliding_window_pattern", GgufValue::U32(99)}}));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("is not a layer period"));
}

TEST(ArchitectureTest, HfClassesReadTheirFeatures) {
  auto parse = [](const std::string& extra, const std::string& cls) {
    return ParseHfConfig(R"({"architectures": [")" + cls + R"("], "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 300)" +
                             extra + "}",
                         "cfg");
  };
  absl::StatusOr<HfConfig> g3 = parse(R"(, "query_pre_attn_scalar": 64, "sliding_window": 8,
      "sliding_window_pattern": 3, "rope_theta": 1000000, "rope_local_base_freq": 10000,
      "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "final_logit_softcapping": null)",
                                      "Gemma3ForCausalLM");
  ASSERT_TRUE(g3.ok()) << g3.status();
  EXPECT_EQ(g3->model.arch, "gemma3");
  EXPECT_EQ(g3->model.query_scale, 0.125f);
  EXPECT_EQ(g3->model.n_window_layers(), 4);  // layers 2 and 5 full
  EXPECT_EQ(g3->model.layer(2).window, 0);
  EXPECT_EQ(g3->model.layer(2).rope_freq_scale, 0.125f);
  EXPECT_EQ(g3->model.layer(0).rope_freq_scale, 1.0f);
  EXPECT_EQ(g3->model.layer(0).rope_theta, 10000.0f);
  EXPECT_TRUE(g3->model.tied_embeddings);  // Gemma's default
  absl::StatusOr<HfConfig> phi =
      parse(R"(, "partial_rotary_factor": 0.75, "sliding_window": 64)", "Phi3ForCausalLM");
  ASSERT_TRUE(phi.ok()) << phi.status();
  EXPECT_EQ(phi->model.n_rot, 12);
  EXPECT_EQ(phi->model.n_window_layers(), 6);
  absl::StatusOr<HfConfig> mistral = parse(R"(, "sliding_window": 4096)", "MistralForCausalLM");
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  EXPECT_EQ(mistral->model.max_window(), 4096);
  EXPECT_EQ(mistral->model.n_window_layers(), 6);
  absl::StatusOr<HfConfig> gelu = parse(R"(, "hidden_activation": "gelu")", "Gemma2ForCausalLM");
  ASSERT_FALSE(gelu.ok());
  EXPECT_THAT(std::string(gelu.status().message()), HasSubstr("gelu_pytorch_tanh"));
  absl::StatusOr<HfConfig> other = parse("", "MambaForCausalLM");
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("Gemma3ForCausalLM"));
}

}  // namespace
}  // namespace pinfer
