#include "tests/testing/synth_models.h"

#include "engine/synth/synth.h"
#include "gtest/gtest.h"
#include "tests/testing/test_models.h"

namespace pinfer::testing {

std::string SynthModelPath(const std::string& shape, const std::string& type, bool no_window) {
  absl::StatusOr<ModelConfig> config = NamedShape(shape);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return "";
  if (no_window) config->layers.clear();
  const std::string path = TempDir("synth") + "/" + shape + "-" + type + ".gguf";
  GgufWriter w;
  absl::StatusOr<FileType> ft = ParseFileType(type);
  EXPECT_TRUE(ft.ok()) << ft.status();
  if (!ft.ok()) return "";
  absl::Status s = AddSynthModel(*config, *ft, SynthOptions{1, 2}, &w);
  if (s.ok()) s = w.WriteFile(path);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? path : "";
}

std::unique_ptr<Model> SynthModel(const std::string& shape, const std::string& type,
                                  bool no_window) {
  const std::string path = SynthModelPath(shape, type, no_window);
  if (path.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

void ExpectSameArchitecture(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.post_norms, b.post_norms);
  EXPECT_EQ(a.scale_embeddings, b.scale_embeddings);
  EXPECT_EQ(a.ffn_act, b.ffn_act);
  EXPECT_EQ(a.attn_softcap, b.attn_softcap);
  EXPECT_EQ(a.final_softcap, b.final_softcap);
  EXPECT_EQ(a.query_scale, b.query_scale);
  EXPECT_EQ(a.n_rot, b.n_rot);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_freq_scale, b.rope_freq_scale);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    EXPECT_EQ(a.layers[l].window, b.layers[l].window) << "layer " << l;
    EXPECT_EQ(a.layers[l].rope_theta, b.layers[l].rope_theta) << "layer " << l;
    EXPECT_EQ(a.layers[l].rope_freq_scale, b.layers[l].rope_freq_scale) << "layer " << l;
  }
}

std::vector<int32_t> LongPrompt() {
  std::vector<int32_t> p = {1};
  for (int i = 0; i < 99; ++i) p.push_back(3 + (i * 37 + 11) % 509);
  return p;
}

}  // namespace pinfer::testing
