// config.json parsing and HF -> GGUF tensor names.
#include "engine/model/hf_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loaders/safetensors.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using ::testing::HasSubstr;

void ExpectTinyLlama(const HfConfig& c) {
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.model.arch, "llama");
  EXPECT_EQ(c.model.dim, 16);
  EXPECT_EQ(c.model.n_ff, 64);
  EXPECT_EQ(c.model.n_layers, 2);
  EXPECT_EQ(c.model.n_heads, 4);
  EXPECT_EQ(c.model.n_kv_heads, 4);
  EXPECT_EQ(c.model.head_dim, 4);
  EXPECT_EQ(c.model.n_vocab, 32000);
  EXPECT_EQ(c.model.context_length, 2048);
  EXPECT_FLOAT_EQ(c.model.rms_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.model.rope_theta, 10000.0f);
  EXPECT_EQ(c.model.rope_style, RopeStyle::kHalves);
  EXPECT_FALSE(c.model.tied_embeddings);
  EXPECT_FALSE(c.model.qkv_bias);
  EXPECT_FALSE(c.quant.has_value());
}

TEST(HfConfigTest, FixtureConfigsParse) {
  PINFER_REQUIRE_MODEL(f32, "hf/tiny-random-llama-f32");
  PINFER_REQUIRE_MODEL(f16, "hf/tiny-random-llama-f16-sharded");
  for (const std::string& dir : {f32, f16}) {
    absl::StatusOr<HfConfig> c = LoadHfConfig(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    ExpectTinyLlama(*c);
  }
  EXPECT_EQ(LoadHfConfig(f32)->model.name, "tiny-random-llama-f32");
}

TEST(HfConfigTest, EveryFixtureTensorHasAnEngineName) {
  PINFER_REQUIRE_MODEL(dir, "hf/tiny-random-llama-f32");
  absl::StatusOr<std::unique_ptr<SafetensorsModel>> m = SafetensorsModel::Open(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  for (const StTensor* t : (*m)->tensors()) {
    EXPECT_TRUE(HfToGgufTensorName(t->name).ok()) << t->name;
  }
}

TEST(HfConfigTest, QwenMistralDefaultsAndQuantization) {
  absl::StatusOr<HfConfig> c = ParseHfConfig(R"({"architectures": ["Qwen2ForCausalLM"],
      "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
      "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 100,
      "rope_theta": 1000000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": true,
      "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32,
                              "desc_act": true, "sym": true}})",
                                             "qwen/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.arch, "qwen2");
  EXPECT_TRUE(c->model.qkv_bias);
  EXPECT_TRUE(c->model.tied_embeddings);
  EXPECT_EQ(c->model.head_dim, 8);  // hidden / heads
  EXPECT_EQ(c->model.n_kv_heads, 2);
  EXPECT_FLOAT_EQ(c->model.rope_theta, 1e6f);
  ASSERT_TRUE(c->quant.has_value());
  EXPECT_EQ(c->quant->group_size, 32);
  EXPECT_TRUE(c->quant->desc_act);

  c = ParseHfConfig(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 32,
      "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
      "vocab_size": 10})",
                    "m");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.arch, "llama");
  EXPECT_EQ(c->model.n_kv_heads, 4);  // defaults to heads
}

TEST(HfConfigTest, Refusals) {
  const std::string base = R"("hidden_size": 32, "intermediate_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10)";
  auto msg = [](const std::string& text) {
    return std::string(ParseHfConfig(text, "cfg.json").status().message());
  };
  EXPECT_THAT(msg(R"({"architectures": ["GPT2LMHeadModel"], )" + base + "}"),
              HasSubstr("architecture 'GPT2LMHeadModel' is not supported"));
  EXPECT_THAT(msg(R"({)" + base + "}"), HasSubstr("no \"architectures\""));
  EXPECT_THAT(msg(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 32})"),
              HasSubstr("missing \"intermediate_size\""));
  EXPECT_THAT(msg(R"({"architectures": ["LlamaForCausalLM"], )" + base +
                  R"(, "quantization_config": {"quant_method": "gptq", "bits": 3}})"),
              HasSubstr("gptq with bits = 3 is not supported"));
  EXPECT_THAT(msg(R"({"architectures": ["LlamaForCausalLM"], )" + base +
                  R"(, "quantization_config": {"quant_method": "awq", "bits": 8}})"),
              HasSubstr("awq with bits = 8 is not supported"));
  EXPECT_THAT(msg("{\"architectures\": "), HasSubstr("cfg.json: invalid JSON"));
}

TEST(HfConfigTest, TensorNames) {
  const std::pair<const char*, const char*> cases[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
      {"model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"},
      {"model.layers.12.self_attn.k_proj.bias", "blk.12.attn_k.bias"},
      {"model.layers.1.self_attn.v_proj.bias", "blk.1.attn_v.bias"},
      {"model.layers.1.self_attn.o_proj.weight", "blk.1.attn_output.weight"},
      {"model.layers.2.mlp.gate_proj.qweight", "blk.2.ffn_gate.qweight"},
      {"model.layers.2.mlp.up_proj.qzeros", "blk.2.ffn_up.qzeros"},
      {"model.layers.2.mlp.down_proj.scales", "blk.2.ffn_down.scales"},
      {"model.layers.2.mlp.down_proj.g_idx", "blk.2.ffn_down.g_idx"},
      {"model.layers.3.input_layernorm.weight", "blk.3.attn_norm.weight"},
      {"model.layers.3.post_attention_layernorm.weight", "blk.3.ffn_norm.weight"},
  };
  for (const auto& [hf, want] : cases) {
    absl::StatusOr<std::string> got = HfToGgufTensorName(hf);
    ASSERT_TRUE(got.ok()) << hf << ": " << got.status();
    EXPECT_EQ(*got, want);
  }
  for (const char* bad :
       {"model.layers.0.self_attn.rotary_emb.inv_freq", "model.layers.x.mlp.up_proj.weight",
        "model.layers..mlp.up_proj.weight", "foo.weight", "model.norm"}) {
    EXPECT_EQ(HfToGgufTensorName(bad).status().code(), absl::StatusCode::kNotFound) << bad;
  }
}

}  // namespace
}  // namespace pinfer
