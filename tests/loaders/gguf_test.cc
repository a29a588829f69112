// GGUF reader/writer: round trips of every value type and several tensor types, typed
// getters, writer-side validation, and the facts of the real stories260K.gguf.
#include "loaders/gguf.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

void ExpectSameValue(const GgufValue& want, const GgufValue& got, const std::string& where) {
  ASSERT_EQ(want.type, got.type) << where;
  switch (want.type) {
    case GgufType::kU8:
    case GgufType::kU16:
    case GgufType::kU32:
    case GgufType::kU64:
    case GgufType::kBool:
      EXPECT_EQ(want.u, got.u) << where;
      break;
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
    case GgufType::kI64:
      EXPECT_EQ(want.i, got.i) << where;
      break;
    case GgufType::kF32:
    case GgufType::kF64:
      EXPECT_EQ(want.f, got.f) << where;
      break;
    case GgufType::kString:
      EXPECT_EQ(want.s, got.s) << where;
      break;
    case GgufType::kArray:
      ASSERT_EQ(want.elem_type, got.elem_type) << where;
      ASSERT_EQ(want.arr.size(), got.arr.size()) << where;
      for (size_t k = 0; k < want.arr.size(); ++k) {
        ExpectSameValue(want.arr[k], got.arr[k], where + "[" + std::to_string(k) + "]");
      }
      break;
  }
}

std::vector<GgufKV> EveryValueType() {
  std::vector<GgufKV> kv;
  kv.push_back({"t.u8", GgufValue::U8(255)});
  kv.push_back({"t.i8", GgufValue::I8(-128)});
  kv.push_back({"t.u16", GgufValue::U16(65535)});
  kv.push_back({"t.i16", GgufValue::I16(-32768)});
  kv.push_back({"t.u32", GgufValue::U32(4000000000u)});
  kv.push_back({"t.i32", GgufValue::I32(-2000000000)});
  kv.push_back({"t.f32", GgufValue::F32(1.1f)});
  kv.push_back({"t.bool.true", GgufValue::Bool(true)});
  kv.push_back({"t.bool.false", GgufValue::Bool(false)});
  kv.push_back({"t.string", GgufValue::Str(std::string("h\xC3\xA9llo\0world", 12))});
  kv.push_back({"t.empty_string", GgufValue::Str("")});
  kv.push_back({"t.u64", GgufValue::U64(std::numeric_limits<uint64_t>::max())});
  kv.push_back({"t.i64", GgufValue::I64(std::numeric_limits<int64_t>::min())});
  kv.push_back({"t.f64", GgufValue::F64(M_PI)});
  kv.push_back({"t.arr.u8", GgufValue::Array(GgufType::kU8, {GgufValue::U8(1), GgufValue::U8(2)})});
  kv.push_back({"t.arr.str",
                GgufValue::Array(GgufType::kString, {GgufValue::Str("a"), GgufValue::Str("")})});
  kv.push_back({"t.arr.empty", GgufValue::Array(GgufType::kF64, {})});
  kv.push_back({"t.arr.bool", GgufValue::Array(GgufType::kBool, {GgufValue::Bool(true)})});
  GgufValue inner1 = GgufValue::Array(GgufType::kI16, {GgufValue::I16(-1), GgufValue::I16(7)});
  GgufValue inner2 = GgufValue::Array(GgufType::kI16, {});
  GgufValue nested = GgufValue::Array(GgufType::kArray, {inner1, inner2});
  kv.push_back({"t.arr.nested", nested});
  kv.push_back({"t.arr.nested3", GgufValue::Array(GgufType::kArray, {nested, nested})});
  return kv;
}

class GgufRoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufRoundTrip, EveryValueTypeIncludingNestedArrays) {
  GgufWriter w(GetParam());
  const std::vector<GgufKV> kv = EveryValueType();
  for (const GgufKV& e : kv) w.Set(e.key, e.value);
  absl::StatusOr<std::vector<uint8_t>> bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(*bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), GetParam());
  EXPECT_EQ((*f)->alignment(), 32u);
  EXPECT_EQ((*f)->data_offset() % 32, 0u);
  ASSERT_EQ((*f)->metadata().size(), kv.size());
  for (size_t k = 0; k < kv.size(); ++k) {
    EXPECT_EQ((*f)->metadata()[k].key, kv[k].key);
    ExpectSameValue(kv[k].value, (*f)->metadata()[k].value, kv[k].key);
  }
  EXPECT_TRUE((*f)->tensors().empty());
}

TEST_P(GgufRoundTrip, TensorsOfSeveralTypesWithCustomAlignment) {
  GgufWriter w(GetParam());
  w.SetU32("general.alignment", 64);
  w.SetString("general.architecture", "llama");
  struct Want {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    size_t nbytes;
  };
  const std::vector<Want> want = {
      {"a.f32", GgmlType::kF32, {3, 5}, 3 * 5 * 4},
      {"b.f16", GgmlType::kF16, {7}, 7 * 2},
      {"c.q8_0", GgmlType::kQ8_0, {64, 3, 2}, 2 * 3 * 2 * 34},
      {"d.q4_k", GgmlType::kQ4_K, {512, 2}, 2 * 2 * 144},
      {"e.bf16", GgmlType::kBF16, {1, 1, 1, 3}, 3 * 2},
  };
  std::vector<std::vector<uint8_t>> blobs;
  for (size_t k = 0; k < want.size(); ++k) {
    blobs.push_back(RandomBytes(want[k].nbytes, static_cast<uint32_t>(k + 1)));
    ASSERT_TRUE(w.AddTensor(want[k].name, want[k].type, want[k].dims, blobs.back()).ok());
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(*bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->data_offset() % 64, 0u);
  ASSERT_EQ((*f)->tensors().size(), want.size());
  uint64_t prev_end = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    const GgufTensorInfo* t = (*f)->FindTensor(want[k].name);
    ASSERT_NE(t, nullptr) << want[k].name;
    EXPECT_EQ(t->type, want[k].type);
    EXPECT_EQ(t->dims, want[k].dims);
    EXPECT_EQ(t->nbytes, want[k].nbytes);
    EXPECT_EQ(t->offset % 64, 0u) << t->name;
    EXPECT_GE(t->offset, prev_end) << "tensors are laid out in order, without overlap";
    prev_end = t->offset + t->nbytes;
    const uint8_t* p = (*f)->data(*t);
    EXPECT_EQ(std::vector<uint8_t>(p, p + t->nbytes), blobs[k]) << t->name;
  }
  EXPECT_EQ((*f)->FindTensor("c.q8_0")->n_elements(), 64 * 3 * 2);
  EXPECT_EQ((*f)->FindTensor("c.q8_0")->n_rows(), 6);
  EXPECT_EQ((*f)->FindTensor("nope"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Versions, GgufRoundTrip, ::testing::Values(2u, 3u));

TEST(GgufWriter, FillCallbackStreamsToAFileThatReadsBackExactly) {
  GgufWriter w;
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  w.SetF32Array("tokenizer.ggml.scores", {0.f, -1.5f, 2.25f});
  w.SetI32Array("tokenizer.ggml.token_type", {2, 3, 3});
  int fills = 0;
  ASSERT_TRUE(w.AddTensor("big", GgmlType::kF32, {256, 1024}, [&fills](uint8_t* dst, size_t n) {
                 ++fills;
                 for (size_t k = 0; k < n; ++k) dst[k] = static_cast<uint8_t>(k * 7);
               }).ok());
  ASSERT_TRUE(
      w.AddTensor("small", GgmlType::kF16, {3}, std::vector<uint8_t>{1, 2, 3, 4, 5, 6}).ok());
  const std::string path = testing::TempDir("gguf") + "/out.gguf";
  ASSERT_TRUE(w.WriteFile(path).ok());
  EXPECT_EQ(fills, 1);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->path(), path);
  EXPECT_EQ((*f)->file_size(), std::filesystem::file_size(path));
  const GgufTensorInfo* big = (*f)->FindTensor("big");
  ASSERT_NE(big, nullptr);
  ASSERT_EQ(big->nbytes, 256u * 1024 * 4);
  const uint8_t* p = (*f)->data(*big);
  for (size_t k = 0; k < big->nbytes; k += 4093) ASSERT_EQ(p[k], static_cast<uint8_t>(k * 7));
  const GgufTensorInfo* small = (*f)->FindTensor("small");
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->offset % 32, 0u);
  EXPECT_EQ(std::vector<uint8_t>((*f)->data(*small), (*f)->data(*small) + 6),
            (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(*(*f)->GetStringArray("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"<unk>", "<s>", "</s>"}));
  EXPECT_EQ(*(*f)->GetFloatArray("tokenizer.ggml.scores"), (std::vector<double>{0, -1.5, 2.25}));
  EXPECT_EQ(*(*f)->GetIntArray("tokenizer.ggml.token_type"), (std::vector<int64_t>{2, 3, 3}));
  absl::StatusOr<std::vector<uint8_t>> in_memory = w.WriteToBytes();
  ASSERT_TRUE(in_memory.ok());
  EXPECT_EQ(in_memory->size(), (*f)->file_size());
}

TEST(GgufWriter, SetReplacesAndKeepsOrder) {
  GgufWriter w;
  w.SetU32("a", 1);
  w.SetU32("b", 2);
  w.SetString("a", "x");
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(*w.WriteToBytes());
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->metadata().size(), 2u);
  EXPECT_EQ((*f)->metadata()[0].key, "a");
  EXPECT_EQ(*(*f)->GetString("a"), "x");
}

TEST(GgufWriter, RejectsBadTensorsAndMetadata) {
  GgufWriter w;
  EXPECT_THAT(w.AddTensor("q", GgmlType::kQ8_0, {33}, std::vector<uint8_t>(34)).message(),
              HasSubstr("not a multiple of Q8_0's block size 32"));
  EXPECT_THAT(w.AddTensor("f", GgmlType::kF32, {4}, std::vector<uint8_t>(15)).message(),
              HasSubstr("15 data bytes given; its type and dims need 16"));
  EXPECT_THAT(w.AddTensor("z", GgmlType::kF32, {4, 0}, std::vector<uint8_t>()).message(),
              HasSubstr("dimension 1 is 0"));
  EXPECT_THAT(w.AddTensor("d", GgmlType::kF32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)).message(),
              HasSubstr("5 dimensions"));
  EXPECT_THAT(w.AddTensor("u", GgmlType::kQ2_K, {256}, std::vector<uint8_t>(84)).message(),
              HasSubstr("Q2_K"));
  EXPECT_THAT(w.AddTensor("n", GgmlType::kF32, {1}, GgufWriter::Fill()).message(),
              HasSubstr("empty Fill"));
  ASSERT_TRUE(w.AddTensor("ok", GgmlType::kF32, {1}, std::vector<uint8_t>(4)).ok());
  EXPECT_THAT(w.AddTensor("ok", GgmlType::kF32, {1}, std::vector<uint8_t>(4)).message(),
              HasSubstr("duplicate tensor name"));

  GgufWriter bad_align;
  bad_align.SetU32("general.alignment", 48);
  EXPECT_THAT(bad_align.WriteToBytes().status().message(), HasSubstr("power of two"));
  GgufWriter bad_version(1);
  EXPECT_THAT(bad_version.WriteToBytes().status().message(), HasSubstr("version 1"));
  GgufWriter mixed;
  mixed.Set("m", GgufValue::Array(GgufType::kU32, {GgufValue::U32(1), GgufValue::Str("x")}));
  EXPECT_THAT(mixed.WriteToBytes().status().message(), HasSubstr("array element 1 is string"));
}

TEST(GgufFile, TypedGettersConvertWhenTheValueFits) {
  GgufWriter w;
  w.Set("u8", GgufValue::U8(200));
  w.Set("u64.big", GgufValue::U64(std::numeric_limits<uint64_t>::max()));
  w.Set("i16", GgufValue::I16(-5));
  w.Set("f64", GgufValue::F64(0.25));
  w.SetF32("f32", 1e-5f);
  w.SetBool("flag", true);
  w.SetString("name", "llama");
  w.Set("ints", GgufValue::Array(GgufType::kU16, {GgufValue::U16(9)}));
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(*w.WriteToBytes());
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(*g.GetInt("u8"), 200);
  EXPECT_EQ(*g.GetInt("i16"), -5);
  EXPECT_THAT(g.GetInt("u64.big").status().message(), HasSubstr("does not fit in an int64"));
  EXPECT_EQ(*g.GetFloat("f64"), 0.25);
  EXPECT_EQ(*g.GetFloat("f32"), static_cast<double>(1e-5f));
  EXPECT_EQ(*g.GetFloat("u8"), 200.0);
  EXPECT_TRUE(*g.GetBool("flag"));
  EXPECT_EQ(*g.GetString("name"), "llama");
  EXPECT_EQ(*g.GetIntArray("ints"), (std::vector<int64_t>{9}));
  EXPECT_EQ(*g.GetFloatArray("ints"), (std::vector<double>{9}));
  EXPECT_EQ(g.GetInt("missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(g.GetInt("name").status().message(),
              HasSubstr("metadata key 'name' is string, not an integer"));
  EXPECT_THAT(g.GetString("u8").status().message(), HasSubstr("is u8, not a string"));
  EXPECT_THAT(g.GetBool("u8").status().message(), HasSubstr("not a bool"));
  EXPECT_THAT(g.GetStringArray("ints").status().message(),
              HasSubstr("is array of u16, not an array of string"));
  EXPECT_THAT(g.GetFloat("flag").status().message(), HasSubstr("is bool, not a number"));
}

TEST(GgufFile, Stories260KFacts) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  absl::StatusOr<std::unique_ptr<GgufFile>> opened = GgufFile::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& f = **opened;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.file_size(), 1185376u);
  EXPECT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  for (const GgufTensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
    EXPECT_EQ(t.nbytes, static_cast<uint64_t>(t.n_elements()) * 4) << t.name;
    EXPECT_LE(f.data_offset() + t.offset + t.nbytes, f.file_size()) << t.name;
  }
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetInt("llama.embedding_length"), 64);
  EXPECT_EQ(*f.GetInt("llama.block_count"), 5);
  EXPECT_EQ(*f.GetInt("llama.feed_forward_length"), 172);
  EXPECT_EQ(*f.GetInt("llama.attention.head_count"), 8);
  EXPECT_EQ(*f.GetInt("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(*f.GetInt("llama.context_length"), 2048);
  EXPECT_NEAR(*f.GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  EXPECT_EQ(f.Find("llama.rope.freq_base"), nullptr);
  EXPECT_EQ(f.Find("general.alignment"), nullptr);
  EXPECT_EQ(*f.GetString("tokenizer.ggml.model"), "llama");
  absl::StatusOr<std::vector<std::string>> tokens = f.GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ((*tokens)[258], "<0xFF>");
  EXPECT_EQ(f.GetFloatArray("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(*f.GetInt("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(*f.GetInt("tokenizer.ggml.eos_token_id"), 2);
  const GgufTensorInfo* embd = f.FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->dims, (std::vector<int64_t>{64, 512}));
  const GgufTensorInfo* ffn = f.FindTensor("blk.0.ffn_gate.weight");
  ASSERT_NE(ffn, nullptr);
  EXPECT_EQ(ffn->dims, (std::vector<int64_t>{64, 172}));
  const GgufTensorInfo* wk = f.FindTensor("blk.4.attn_k.weight");
  ASSERT_NE(wk, nullptr);
  EXPECT_EQ(wk->dims, (std::vector<int64_t>{64, 32}));  // 4 kv heads x head dim 8
}

}  // namespace
}  // namespace pinfer
