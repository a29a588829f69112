// ModelConfig's per-layer attention: the llama.cpp sliding-window pattern (set_swa_pattern),
// the resolved view of a config without per-layer entries, and Validate's checks.
#include <gtest/gtest.h>

#include "engine/model/model_config.h"

namespace pinfer {
namespace {

ModelConfig Base(int n_layers) {
  ModelConfig c;
  c.n_vocab = 300;
  c.dim = 64;
  c.n_ff = 128;
  c.n_layers = n_layers;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.rope_theta = 1e6f;
  c.rope_freq_scale = 0.125f;
  return c;
}

TEST(LayerAttentionTest, WithoutEntriesEveryLayerIsFullWithTheModelsRope) {
  const ModelConfig c = Base(3);
  EXPECT_FALSE(c.has_sliding_window());
  EXPECT_EQ(c.max_window(), 0);
  EXPECT_EQ(c.n_window_layers(), 0);
  for (int l = 0; l < 3; ++l) {
    EXPECT_TRUE(c.layer(l).full());
    EXPECT_EQ(c.layer(l).rope_theta, 1e6f);
    EXPECT_EQ(c.layer(l).rope_freq_scale, 0.125f);
  }
  EXPECT_TRUE(c.Validate().ok());
}

TEST(LayerAttentionTest, Gemma3PatternFiveLocalLayersPerGlobalOne) {
  ModelConfig c = Base(12);
  c.SetSlidingWindow(1024, 6, 10000.0f, 1.0f);
  ASSERT_EQ(c.layers.size(), 12u);
  for (int l = 0; l < 12; ++l) {
    const bool global = l % 6 == 5;  // layers 5 and 11, as llama.cpp's set_swa_pattern(6)
    EXPECT_EQ(c.layer(l).window, global ? 0 : 1024) << l;
    EXPECT_EQ(c.layer(l).rope_theta, global ? 1e6f : 10000.0f) << l;
    EXPECT_EQ(c.layer(l).rope_freq_scale, global ? 0.125f : 1.0f) << l;
  }
  EXPECT_EQ(c.max_window(), 1024);
  EXPECT_EQ(c.n_window_layers(), 10);
  EXPECT_TRUE(c.Validate().ok());
}

TEST(LayerAttentionTest, Gemma2AlternatesAndPeriodZeroWindowsEveryLayer) {
  ModelConfig c = Base(4);
  c.SetSlidingWindow(4096, 2, c.rope_theta, c.rope_freq_scale);
  EXPECT_EQ(c.layer(0).window, 4096);
  EXPECT_EQ(c.layer(1).window, 0);
  EXPECT_EQ(c.layer(2).window, 4096);
  EXPECT_EQ(c.layer(3).window, 0);
  c.SetSlidingWindow(4096, 0, c.rope_theta, c.rope_freq_scale);  // Mistral 7B v0.1
  EXPECT_EQ(c.n_window_layers(), 4);
  c.SetSlidingWindow(4096, 1, c.rope_theta, c.rope_freq_scale);  // llama.cpp: period 1, none
  EXPECT_EQ(c.n_window_layers(), 0);
  c.SetSlidingWindow(0, 2, c.rope_theta, c.rope_freq_scale);
  EXPECT_TRUE(c.layers.empty());
}

TEST(LayerAttentionTest, ValidateRefusesAWrongCountOrBadValues) {
  ModelConfig c = Base(4);
  c.SetSlidingWindow(64, 2, 10000.0f, 1.0f);
  c.layers.pop_back();
  EXPECT_NE(c.Validate().message().find("3 per-layer attention entries for 4 layers"),
            std::string::npos)
      << c.Validate();
  c.SetSlidingWindow(64, 2, 10000.0f, 1.0f);
  c.layers[1].window = -1;
  EXPECT_FALSE(c.Validate().ok());
  c.SetSlidingWindow(64, 2, 0.0f, 1.0f);
  EXPECT_NE(c.Validate().message().find("layer 0: RoPE base 0"), std::string::npos) << c.Validate();
}

}  // namespace
}  // namespace pinfer
