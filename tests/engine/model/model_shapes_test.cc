#include "engine/model/model_shapes.h"

#include <map>

#include "gtest/gtest.h"

namespace pinfer {
namespace {

ModelConfig Shape(std::string_view name) {
  absl::StatusOr<ModelConfig> c = NamedShape(name);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

FileType Type(std::string_view name) {
  absl::StatusOr<FileType> ft = ParseFileType(name);
  EXPECT_TRUE(ft.ok()) << ft.status();
  return *ft;
}

std::map<std::string, TensorPlan> ByName(const std::vector<TensorPlan>& plan) {
  std::map<std::string, TensorPlan> m;
  for (const TensorPlan& t : plan) m[t.name] = t;
  return m;
}

TEST(NamedShape, PublishedHyperParameters) {
  ModelConfig l2 = Shape("llama2-7b");
  EXPECT_EQ(l2.dim, 4096);
  EXPECT_EQ(l2.n_ff, 11008);
  EXPECT_EQ(l2.n_layers, 32);
  EXPECT_EQ(l2.n_kv_heads, 32);
  EXPECT_EQ(l2.head_dim, 128);
  EXPECT_EQ(l2.context_length, 4096);

  ModelConfig m = Shape("mistral-7b");
  EXPECT_EQ(m.n_kv_heads, 8);
  EXPECT_EQ(m.n_ff, 14336);
  EXPECT_FLOAT_EQ(m.rope_theta, 10000.0f);  // v0.1

  ModelConfig l3 = Shape("llama3-8b");
  EXPECT_EQ(l3.n_vocab, 128256);
  EXPECT_FLOAT_EQ(l3.rope_theta, 500000.0f);

  ModelConfig q = Shape("qwen2-7b");
  EXPECT_EQ(q.arch, "qwen2");
  EXPECT_EQ(q.dim, 3584);
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_EQ(q.n_kv_heads, 4);
  EXPECT_TRUE(q.qkv_bias);
  EXPECT_EQ(q.rope_style, RopeStyle::kHalves);
  EXPECT_FLOAT_EQ(q.rope_theta, 1e6f);

  ModelConfig t = Shape("tiny");
  EXPECT_EQ(t.dim % 256, 0);
  EXPECT_EQ(t.n_ff % 256, 0);
  EXPECT_EQ(t.n_heads % t.n_kv_heads, 0);
}

TEST(NamedShape, EveryNameResolvesAndUnknownNamesAreListed) {
  for (const std::string& name : NamedShapeNames()) {
    ModelConfig c = Shape(name);
    EXPECT_TRUE(c.Validate().ok()) << name << ": " << c.Validate();
    // Gemma 3's heads are wider than dim / n_heads (4b: 8 x 256 over 2560).
    if (c.arch != "gemma3") {
      EXPECT_EQ(c.dim, c.n_heads * c.head_dim) << name;
    }
    EXPECT_EQ(c.n_heads % c.n_kv_heads, 0) << name;
  }
  absl::StatusOr<ModelConfig> bad = NamedShape("llama9-1t");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("llama2-7b"), std::string_view::npos);
}

TEST(ParseFileType, AcceptsAnyCaseAndListsChoices) {
  EXPECT_EQ(Type("q4_k_m").name, "Q4_K_M");
  EXPECT_TRUE(Type("Q4_K_M").k_mix);
  EXPECT_EQ(Type("Q5_K_M").base, GgmlType::kQ5_K);
  EXPECT_EQ(Type("f16").base, GgmlType::kF16);
  EXPECT_FALSE(Type("Q8_0").k_mix);
  absl::StatusOr<FileType> bad = ParseFileType("Q3_K_S");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("Q4_K_M"), std::string_view::npos);
}

TEST(PlanTensors, LlamaOrderDimsAndTypes) {
  ModelConfig c = Shape("llama2-7b");
  std::vector<TensorPlan> plan = PlanTensors(c, Type("Q4_0"));
  ASSERT_EQ(plan.size(), 1u + 32u * 9u + 2u);
  EXPECT_EQ(plan.front().name, "token_embd.weight");
  EXPECT_EQ(plan.front().dims, (std::vector<int64_t>{4096, 32000}));
  EXPECT_EQ(plan[1].name, "blk.0.attn_norm.weight");
  EXPECT_EQ(plan.back().name, "output.weight");
  auto m = ByName(plan);
  EXPECT_EQ(m["blk.0.attn_norm.weight"].type, GgmlType::kF32);
  EXPECT_EQ(m["blk.3.ffn_down.weight"].dims, (std::vector<int64_t>{11008, 4096}));
  EXPECT_EQ(m["blk.3.ffn_down.weight"].type, GgmlType::kQ4_0);
  EXPECT_EQ(m["token_embd.weight"].type, GgmlType::kQ4_0);
  EXPECT_EQ(m["output.weight"].type, GgmlType::kQ6_K);  // as llama-quantize stores it
  EXPECT_EQ(m["output_norm.weight"].type, GgmlType::kF32);
  for (const TensorPlan& t : plan) EXPECT_TRUE(t.fallback_note.empty()) << t.name;
}

TEST(PlanTensors, GroupedQueryAttentionWidths) {
  auto m = ByName(PlanTensors(Shape("mistral-7b"), Type("F16")));
  EXPECT_EQ(m["blk.0.attn_k.weight"].dims, (std::vector<int64_t>{4096, 1024}));
  EXPECT_EQ(m["blk.0.attn_v.weight"].dims, (std::vector<int64_t>{4096, 1024}));
  EXPECT_EQ(m["blk.0.attn_q.weight"].dims, (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(m["output.weight"].type, GgmlType::kF16);
}

TEST(PlanTensors, Qwen2HasF32Biases) {
  ModelConfig c = Shape("qwen2-7b");
  auto m = ByName(PlanTensors(c, Type("Q4_K_M")));
  EXPECT_EQ(m["blk.5.attn_q.bias"].dims, (std::vector<int64_t>{3584}));
  EXPECT_EQ(m["blk.5.attn_k.bias"].dims, (std::vector<int64_t>{512}));
  EXPECT_EQ(m["blk.5.attn_v.bias"].type, GgmlType::kF32);
  EXPECT_EQ(m.size(), 1u + 28u * 12u + 2u);
}

TEST(PlanTensors, KMixUsesMoreBitsOnLlamaCppLayers) {
  auto m = ByName(PlanTensors(Shape("llama2-7b"), Type("Q4_K_M")));
  // 32 layers: 0-3, 28-31, and 6, 9, ..., 27 get Q6_K.
  std::vector<int> q6;
  for (int l = 0; l < 32; ++l) {
    GgmlType v = m["blk." + std::to_string(l) + ".attn_v.weight"].type;
    GgmlType d = m["blk." + std::to_string(l) + ".ffn_down.weight"].type;
    EXPECT_EQ(v, d) << l;
    if (v == GgmlType::kQ6_K)
      q6.push_back(l);
    else
      EXPECT_EQ(v, GgmlType::kQ4_K) << l;
  }
  EXPECT_EQ(q6, (std::vector<int>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
  EXPECT_EQ(m["blk.6.attn_q.weight"].type, GgmlType::kQ4_K);
  EXPECT_EQ(m["blk.6.ffn_up.weight"].type, GgmlType::kQ4_K);
  EXPECT_EQ(m["token_embd.weight"].type, GgmlType::kQ4_K);
  EXPECT_EQ(m["output.weight"].type, GgmlType::kQ6_K);

  auto m5 = ByName(PlanTensors(Shape("llama2-7b"), Type("Q5_K_M")));
  EXPECT_EQ(m5["blk.4.attn_v.weight"].type, GgmlType::kQ5_K);
  EXPECT_EQ(m5["blk.6.attn_v.weight"].type, GgmlType::kQ6_K);
}

TEST(PlanTensors, TiedEmbeddingsTakeTheOutputType) {
  ModelConfig c = Shape("tiny");
  c.tied_embeddings = true;
  auto m = ByName(PlanTensors(c, Type("Q4_K_M")));
  EXPECT_EQ(m.count("output.weight"), 0u);
  EXPECT_EQ(m["token_embd.weight"].type, GgmlType::kQ6_K);
}

TEST(PlanTensors, FallbackWhenBlocksDoNotDivideRows) {
  ModelConfig c = Shape("tiny");
  c.n_ff = 672;  // a multiple of 32, not of 256
  auto m = ByName(PlanTensors(c, Type("Q4_K_M")));
  EXPECT_EQ(m["blk.1.ffn_gate.weight"].type, GgmlType::kQ4_K);  // rows of dim = 256
  EXPECT_EQ(m["blk.1.ffn_down.weight"].type, GgmlType::kQ5_0);  // rows of 672
  EXPECT_NE(m["blk.1.ffn_down.weight"].fallback_note.find("672"), std::string::npos);
  EXPECT_EQ(m["blk.3.ffn_down.weight"].type, GgmlType::kQ8_0);  // a Q6_K layer -> Q8_0

  c.n_ff = 688;  // not even a multiple of 32
  auto f = ByName(PlanTensors(c, Type("Q4_0")));
  EXPECT_EQ(f["blk.1.ffn_down.weight"].type, GgmlType::kF16);
  EXPECT_NE(f["blk.1.ffn_down.weight"].fallback_note.find("F16"), std::string::npos);

  ModelConfig odd = Shape("tiny");
  odd.dim = 160;  // output rows of 160: Q6_K impossible -> Q8_0
  odd.head_dim = 20;
  auto o = ByName(PlanTensors(odd, Type("Q4_0")));
  EXPECT_EQ(o["output.weight"].type, GgmlType::kQ8_0);
  EXPECT_FALSE(o["output.weight"].fallback_note.empty());
}

TEST(TensorBytes, ExactSizesOfKnownFiles) {
  ModelConfig c = Shape("llama2-7b");
  // llama-quantize's llama-2-7b Q4_0 and Q4_K_M tensor data (files add ~0.7 MB of metadata).
  EXPECT_EQ(TensorBytes(PlanTensors(c, Type("Q4_0"))), 3825065984ull);
  EXPECT_EQ(TensorBytes(PlanTensors(c, Type("Q4_K_M"))), 4080263168ull);
  // F16: 2 bytes per weight, norms 4.
  uint64_t params = 2ull * 32000 * 4096 + 32ull * (4ull * 4096 * 4096 + 3ull * 4096 * 11008);
  EXPECT_EQ(TensorBytes(PlanTensors(c, Type("F16"))), params * 2 + 65ull * 4096 * 4);
}

}  // namespace
TEST(LlamaFileTypeId, LlamaCppNumbers) {
  EXPECT_EQ(LlamaFileTypeId(*ParseFileType("Q4_K_M")), 15u);
  EXPECT_EQ(LlamaFileTypeId(*ParseFileType("Q5_K_M")), 17u);
  EXPECT_EQ(LlamaFileTypeId(*ParseFileType("Q4_0")), 2u);
  EXPECT_EQ(LlamaFileTypeId(*ParseFileType("Q8_0")), 7u);
  EXPECT_EQ(LlamaFileTypeId(*ParseFileType("F16")), 1u);
  EXPECT_EQ(LlamaFileTypeId(*ParseFileType("BF16")), 32u);
}

}  // namespace pinfer
