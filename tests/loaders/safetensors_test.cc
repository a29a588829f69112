// Safetensors reader and writer: round trips and the Hugging Face fixtures.
#include "loaders/safetensors.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loaders/fp16.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using ::testing::ElementsAre;

std::vector<uint8_t> FloatBytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint8_t> HalfBytes(const std::vector<float>& v, bool bf16) {
  std::vector<uint8_t> b;
  for (float f : v) {
    const uint16_t h = bf16 ? Fp32ToBf16(f) : Fp32ToFp16(f);
    b.push_back(static_cast<uint8_t>(h));
    b.push_back(static_cast<uint8_t>(h >> 8));
  }
  return b;
}

TEST(SafetensorsTest, RoundTripThroughWriter) {
  std::vector<StTensorData> in = {
      {"a.weight", StDtype::kF32, {2, 3}, FloatBytes({1, 2, 3, 4, 5, -6.5f})},
      {"b.f16", StDtype::kF16, {3}, HalfBytes({0.5f, -1.0f, 2.0f}, false)},
      {"c.bf16", StDtype::kBF16, {1, 1, 2}, HalfBytes({3.0f, -0.25f}, true)},
      {"d.i32", StDtype::kI32, {2}, {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}},
      {"e.i8", StDtype::kI8, {1}, {0x80}},
      {"f.u8", StDtype::kU8, {0}, {}},
      {"g.scalar", StDtype::kF32, {}, FloatBytes({42.0f})},
  };
  absl::StatusOr<std::vector<uint8_t>> bytes = SerializeSafetensors(in, {{"format", "pt"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  uint64_t n = 0;
  std::memcpy(&n, bytes->data(), 8);
  EXPECT_EQ(n % 8, 0u) << "header padded to 8 bytes";

  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f =
      SafetensorsFile::FromMapped(MappedFile::FromBytes(*bytes));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->data_offset(), 8 + n);
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  ASSERT_EQ((*f)->tensors().size(), in.size());
  for (const StTensorData& want : in) {
    const StTensor* t = (*f)->Find(want.name);
    ASSERT_NE(t, nullptr) << want.name;
    EXPECT_EQ(t->dtype, want.dtype);
    EXPECT_EQ(t->shape, want.shape);
    ASSERT_EQ(t->nbytes, want.data.size());
    EXPECT_EQ(0, std::memcmp(t->data, want.data.data(), t->nbytes)) << want.name;
  }
  EXPECT_FLOAT_EQ(StReadFloat(*(*f)->Find("a.weight"), 5), -6.5f);
  EXPECT_FLOAT_EQ(StReadFloat(*(*f)->Find("b.f16"), 1), -1.0f);
  EXPECT_FLOAT_EQ(StReadFloat(*(*f)->Find("c.bf16"), 1), -0.25f);
  EXPECT_EQ(StReadI32(*(*f)->Find("d.i32"), 1), -1);
  EXPECT_EQ((*f)->Find("g.scalar")->numel(), 1);
  EXPECT_EQ((*f)->Find("missing"), nullptr);
  absl::StatusOr<std::vector<float>> floats = StToFloats(*(*f)->Find("c.bf16"));
  ASSERT_TRUE(floats.ok());
  EXPECT_THAT(*floats, ElementsAre(3.0f, -0.25f));
  EXPECT_FALSE(StToFloats(*(*f)->Find("d.i32")).ok());

  // Written to disk and opened as a folder's single file.
  const std::string dir = testing::TempDir("st-roundtrip");
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", in, {}).ok());
  absl::StatusOr<std::unique_ptr<SafetensorsModel>> m = SafetensorsModel::Open(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->tensors().size(), in.size());
  EXPECT_EQ((*m)->files().front()->metadata().size(), 0u);
  EXPECT_FLOAT_EQ(StReadFloat(*(*m)->Find("a.weight"), 0), 1.0f);
  std::filesystem::remove_all(dir);
}

TEST(SafetensorsTest, WriterRefusesBadInput) {
  EXPECT_FALSE(SerializeSafetensors({{"x", StDtype::kF32, {2}, {0, 0, 0, 0}}}, {}).ok());
  EXPECT_FALSE(
      SerializeSafetensors({{"x", StDtype::kU8, {1}, {0}}, {"x", StDtype::kU8, {1}, {0}}}, {})
          .ok());
  EXPECT_FALSE(SerializeSafetensors({{"__metadata__", StDtype::kU8, {1}, {0}}}, {}).ok());
}

TEST(SafetensorsTest, LoadsTinyLlamaF32) {
  PINFER_REQUIRE_MODEL(path, "hf/tiny-random-llama-f32/model.safetensors");
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->data_offset(), 2192u);
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  ASSERT_EQ((*f)->tensors().size(), 21u);
  for (const StTensor& t : (*f)->tensors()) EXPECT_EQ(t.dtype, StDtype::kF32) << t.name;
  const StTensor* emb = (*f)->Find("model.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_THAT(emb->shape, ElementsAre(32000, 16));
  EXPECT_EQ(emb->data, (*f)->tensors()[1].data);  // second by offset, after lm_head
  const StTensor* down = (*f)->Find("model.layers.1.mlp.down_proj.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_THAT(down->shape, ElementsAre(16, 64));
  // RMSNorm weights are 1.0 +/- ~1.4e-6 (PROVENANCE.txt).
  const StTensor* norm = (*f)->Find("model.norm.weight");
  ASSERT_NE(norm, nullptr);
  for (int64_t i = 0; i < norm->numel(); ++i) EXPECT_NEAR(StReadFloat(*norm, i), 1.0f, 1e-4);
}

TEST(SafetensorsTest, LoadsShardedF16ThroughIndex) {
  PINFER_REQUIRE_MODEL(dir, "hf/tiny-random-llama-f16-sharded");
  absl::StatusOr<std::unique_ptr<SafetensorsModel>> m = SafetensorsModel::Open(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->files().size(), 1u);
  ASSERT_EQ((*m)->tensors().size(), 21u);
  for (const StTensor* t : (*m)->tensors()) EXPECT_EQ(t->dtype, StDtype::kF16) << t->name;
  const StTensor* lm = (*m)->Find("lm_head.weight");
  ASSERT_NE(lm, nullptr);
  EXPECT_THAT(lm->shape, ElementsAre(32000, 16));
  EXPECT_EQ(lm->nbytes, 1024000u);
  const StTensor* norm = (*m)->Find("model.layers.0.input_layernorm.weight");
  ASSERT_NE(norm, nullptr);
  for (int64_t i = 0; i < norm->numel(); ++i) EXPECT_EQ(StReadFloat(*norm, i), 1.0f);

  // The F16 weights are the F32 folder's weights merged 0.5/0.5 with another checkpoint, so
  // only their scale is comparable: std ~0.02.
  absl::StatusOr<std::vector<float>> w = StToFloats(*(*m)->Find("model.embed_tokens.weight"));
  ASSERT_TRUE(w.ok());
  double sq = 0;
  for (float x : *w) sq += static_cast<double>(x) * x;
  EXPECT_NEAR(std::sqrt(sq / w->size()), 0.02, 0.005);
}

}  // namespace
}  // namespace pinfer
