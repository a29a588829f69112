// Synthetic models written and read back. Needs the GGUF writer and reader, the quantizers
// and the tokenizer (loaders/), so it links once those are integrated.
#include "engine/synth/synth.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "engine/synth/synth_data.h"
#include "gtest/gtest.h"
#include "loaders/quants.h"
#include "loaders/tokenizer.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

std::vector<uint8_t> Synth(std::string_view shape, std::string_view type, uint64_t seed,
                           int threads = 2) {
  GgufWriter w;
  absl::Status s =
      AddSynthModel(*NamedShape(shape), *ParseFileType(type), SynthOptions{seed, threads}, &w);
  EXPECT_TRUE(s.ok()) << s;
  absl::StatusOr<std::vector<uint8_t>> bytes = w.WriteToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>();
}

std::unique_ptr<GgufFile> Read(std::vector<uint8_t> bytes) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(std::move(bytes));
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(*f) : nullptr;
}

TEST(Synth, MetadataAsLlamaCppNamesIt) {
  std::unique_ptr<GgufFile> f = Read(Synth("tiny", "Q4_0", 1));
  ASSERT_NE(f, nullptr);
  const ModelConfig c = *NamedShape("tiny");
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetInt("general.file_type"), 2);
  EXPECT_EQ(*f->GetInt("llama.context_length"), c.context_length);
  EXPECT_EQ(*f->GetInt("llama.embedding_length"), c.dim);
  EXPECT_EQ(*f->GetInt("llama.block_count"), c.n_layers);
  EXPECT_EQ(*f->GetInt("llama.feed_forward_length"), c.n_ff);
  EXPECT_EQ(*f->GetInt("llama.attention.head_count"), c.n_heads);
  EXPECT_EQ(*f->GetInt("llama.attention.head_count_kv"), c.n_kv_heads);
  EXPECT_NEAR(*f->GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  EXPECT_NEAR(*f->GetFloat("llama.rope.freq_base"), 10000.0, 1e-3);
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "llama");
  std::vector<std::string> tokens = *f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_EQ(static_cast<int>(tokens.size()), c.n_vocab);
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[3 + 0x41], "<0x41>");
  EXPECT_EQ(f->GetFloatArray("tokenizer.ggml.scores")->size(), tokens.size());
  EXPECT_EQ(f->GetIntArray("tokenizer.ggml.token_type")->size(), tokens.size());
  EXPECT_EQ(*f->GetInt("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(*f->GetInt("tokenizer.ggml.eos_token_id"), 2);

  absl::StatusOr<ModelConfig> read = ModelConfigFromGguf(*f);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv_dim(), c.kv_dim());
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(*f);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->n_vocab(), c.n_vocab);
}

TEST(Synth, TensorsFollowThePlan) {
  for (std::string_view type : {"Q4_0", "Q4_K_M", "F16", "Q8_0"}) {
    std::unique_ptr<GgufFile> f = Read(Synth("tiny", type, 1));
    ASSERT_NE(f, nullptr);
    std::vector<TensorPlan> plan = PlanTensors(*NamedShape("tiny"), *ParseFileType(type));
    ASSERT_EQ(f->tensors().size(), plan.size()) << type;
    uint64_t total = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      const GgufTensorInfo& t = f->tensors()[i];
      EXPECT_EQ(t.name, plan[i].name);
      EXPECT_EQ(t.dims, plan[i].dims) << t.name;
      EXPECT_EQ(t.type, plan[i].type) << t.name;
      total += t.nbytes;
    }
    EXPECT_EQ(total, TensorBytes(plan)) << type;
  }
}

TEST(Synth, WeightsAreSaneAfterQuantization) {
  std::unique_ptr<GgufFile> f = Read(Synth("tiny", "Q4_K_M", 3));
  ASSERT_NE(f, nullptr);
  const GgufTensorInfo* q = f->FindTensor("blk.1.attn_q.weight");
  ASSERT_NE(q, nullptr);
  std::vector<float> row(q->dims[0]);
  DequantizeRow(q->type, f->data(*q), row.data(), q->dims[0]);
  double sq = 0;
  for (float v : row) sq += v * v;
  EXPECT_NEAR(std::sqrt(sq / row.size()), 0.02, 0.004);
  const GgufTensorInfo* norm = f->FindTensor("blk.1.ffn_norm.weight");
  ASSERT_NE(norm, nullptr);
  const float* n = reinterpret_cast<const float*>(f->data(*norm));
  for (int64_t i = 0; i < norm->dims[0]; ++i) ASSERT_EQ(n[i], 1.0f);
}

TEST(Synth, DeterministicForASeedWhateverTheThreads) {
  std::vector<uint8_t> a = Synth("tiny", "Q4_K_M", 5, 1);
  EXPECT_EQ(a, Synth("tiny", "Q4_K_M", 5, 4));
  EXPECT_NE(a, Synth("tiny", "Q4_K_M", 6, 1));
}

TEST(Synth, Qwen2BiasesAndArchKeys) {
  ModelConfig c = *NamedShape("tiny");
  c.arch = "qwen2";
  c.qkv_bias = true;
  GgufWriter w;
  ASSERT_TRUE(AddSynthModel(c, *ParseFileType("Q8_0"), SynthOptions{}, &w).ok());
  std::unique_ptr<GgufFile> f = Read(*w.WriteToBytes());
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->GetString("general.architecture"), "qwen2");
  EXPECT_EQ(*f->GetInt("qwen2.block_count"), c.n_layers);
  ASSERT_NE(f->FindTensor("blk.0.attn_k.bias"), nullptr);
}

TEST(Synth, WritesAFile) {
  const std::string path = ::pinfer::testing::TempDir("synth") + "/tiny.gguf";
  ASSERT_TRUE(WriteSynthModel("tiny", "Q4_0", path, SynthOptions{}).ok());
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(WriteSynthModel("tiny", "Q3_K", path, SynthOptions{}).ok());
  // The first layers only, every width kept.
  const std::string path2 = ::pinfer::testing::TempDir("synth") + "/tiny-2-layers.gguf";
  ASSERT_TRUE(WriteSynthModel("tiny", "Q4_0", path2, SynthOptions{1, 0, 2}).ok());
  absl::StatusOr<std::unique_ptr<GgufFile>> two = GgufFile::Open(path2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*(*two)->GetInt("llama.block_count"), 2);
  EXPECT_NE((*two)->FindTensor("blk.1.ffn_down.weight"), nullptr);
  EXPECT_EQ((*two)->FindTensor("blk.2.ffn_down.weight"), nullptr);
  EXPECT_EQ((*two)->FindTensor("blk.1.ffn_down.weight")->dims,
            (*f)->FindTensor("blk.1.ffn_down.weight")->dims);
  EXPECT_FALSE(WriteSynthModel("tiny", "Q4_0", path2, SynthOptions{1, 0, 99}).ok());
  EXPECT_FALSE(WriteSynthModel("nope", "Q4_0", path, SynthOptions{}).ok());
}

TEST(Synth, CommandWritesTheSameFileAsTheLibrary) {
  const char* bin = std::getenv("PAGEDINFER_BIN");
  if (bin == nullptr || !std::filesystem::exists(bin)) {
    GTEST_SKIP() << "pagedinfer binary not built ($PAGEDINFER_BIN unset or absent)";
  }
  const std::string dir = ::pinfer::testing::TempDir("synth-cli");
  const std::string cmd = std::string(bin) + " synth --shape tiny --type Q4_K_M --seed 9 -o " +
                          dir + "/cli.gguf > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ASSERT_TRUE(WriteSynthModel("tiny", "Q4_K_M", dir + "/lib.gguf", SynthOptions{9, 1}).ok());
  absl::StatusOr<std::unique_ptr<GgufFile>> a = GgufFile::Open(dir + "/cli.gguf");
  absl::StatusOr<std::unique_ptr<GgufFile>> b = GgufFile::Open(dir + "/lib.gguf");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)->file_size(), (*b)->file_size());
  const GgufTensorInfo* t = (*a)->FindTensor("blk.2.ffn_down.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(std::memcmp((*a)->data(*t), (*b)->data(*(*b)->FindTensor(t->name)), t->nbytes), 0);
  EXPECT_NE(std::system((std::string(bin) + " synth --shape tiny 2> /dev/null").c_str()), 0)
      << "no -o must fail";
}

}  // namespace
}  // namespace pinfer
