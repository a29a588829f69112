// GGUF hyper-parameters are checked for meaning: stories260K (5 layers, head dim 8) with one
// key changed at a time is refused with a message naming the key, instead of loading and
// running wrongly (rms epsilon inf printed <unk>; block_count 1 silently ran one layer).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/model/model.h"
#include "engine/model/model_config.h"
#include "loaders/gguf.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using ::testing::HasSubstr;

// stories260K with `key` set to `value` (or removed when value is nullopt).
std::unique_ptr<GgufFile> WithKey(const GgufFile& f, const std::string& key,
                                  std::optional<GgufValue> value) {
  GgufWriter w;
  for (const GgufKV& kv : f.metadata()) w.Set(kv.key, kv.value);
  if (value) w.Set(key, *value);
  for (const GgufTensorInfo& t : f.tensors()) {
    const uint8_t* p = f.data(t);
    EXPECT_TRUE(w.AddTensor(t.name, t.type, t.dims, std::vector<uint8_t>(p, p + t.nbytes)).ok());
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = w.WriteToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::unique_ptr<GgufFile>> out = GgufFile::FromBytes(std::move(*bytes));
  EXPECT_TRUE(out.ok()) << out.status();
  return std::move(*out);
}

class GgufHparamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::ModelPath("stories260K.gguf");
    if (path_.empty()) GTEST_SKIP() << "stories260K.gguf not found under " << testing::ModelsDir();
    auto f = GgufFile::Open(path_);
    ASSERT_TRUE(f.ok()) << f.status();
    file_ = std::move(*f);
  }
  std::string Refusal(const std::string& key, GgufValue v) {
    absl::StatusOr<ModelConfig> c = ModelConfigFromGguf(*WithKey(*file_, "llama." + key, v));
    return c.ok() ? "(accepted)" : std::string(c.status().message());
  }
  std::string path_;
  std::unique_ptr<GgufFile> file_;
};

TEST_F(GgufHparamsTest, TheUnchangedFileIsAccepted) {
  absl::StatusOr<ModelConfig> c = ModelConfigFromGguf(*WithKey(*file_, "", std::nullopt));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_layers, 5);
  EXPECT_EQ(c->head_dim, 8);
}

TEST_F(GgufHparamsTest, RmsEpsilonMustBeFinitePositiveAndSmall) {
  const std::string eps = "attention.layer_norm_rms_epsilon";
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf(""), 0.0f, -1e-5f, 10.0f}) {
    EXPECT_THAT(Refusal(eps, GgufValue::F32(bad)), HasSubstr("RMS norm epsilon")) << bad;
  }
  EXPECT_EQ(Refusal(eps, GgufValue::F32(1e-6f)), "(accepted)");
}

TEST_F(GgufHparamsTest, BlockCountMustMatchTheLayersPresent) {
  EXPECT_THAT(Refusal("block_count", GgufValue::U32(1)),
              HasSubstr("block_count = 1, but the file's tensors describe layers 0 to 4"));
  EXPECT_THAT(Refusal("block_count", GgufValue::U32(6)),
              HasSubstr("block_count = 6, but the file's tensors describe layers 0 to 4"));
}

TEST_F(GgufHparamsTest, RopeDimensionAndValueWidthMustMatchTheHeadDim) {
  EXPECT_THAT(Refusal("rope.dimension_count", GgufValue::U32(4)),
              HasSubstr("rope.dimension_count = 4 does not match the head dim 8"));
  EXPECT_THAT(Refusal("rope.dimension_count", GgufValue::U32(16)),
              HasSubstr("RoPE cannot cover more than a head"));
  EXPECT_THAT(Refusal("attention.value_length", GgufValue::U32(4)),
              HasSubstr("value heads must be as wide as key heads"));
  EXPECT_THAT(Refusal("rope.freq_base", GgufValue::F32(std::numeric_limits<float>::infinity())),
              HasSubstr("RoPE base"));
}

TEST_F(GgufHparamsTest, ModelLoadRefusesTheBrokenFileToo) {
  const std::string out = testing::TempDir("gguf-hparams") + "/one_layer.gguf";
  GgufWriter w;
  for (const GgufKV& kv : file_->metadata()) w.Set(kv.key, kv.value);
  w.SetU32("llama.block_count", 1);
  for (const GgufTensorInfo& t : file_->tensors()) {
    const uint8_t* p = file_->data(t);
    ASSERT_TRUE(w.AddTensor(t.name, t.type, t.dims, std::vector<uint8_t>(p, p + t.nbytes)).ok());
  }
  ASSERT_TRUE(w.WriteFile(out).ok());
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Load(out);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("block_count = 1"));
}

}  // namespace
}  // namespace pinfer
