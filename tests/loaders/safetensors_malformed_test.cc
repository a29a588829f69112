// Malformed safetensors files and checkpoint folders are refused with messages that say what was
// wrong.
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loaders/safetensors.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using ::testing::HasSubstr;

// An 8-byte length (the header's own unless `len` is given), the header text, then `data_bytes`
// zero bytes.
std::vector<uint8_t> Raw(const std::string& header, size_t data_bytes, int64_t len = -1) {
  const uint64_t n = len < 0 ? header.size() : static_cast<uint64_t>(len);
  std::vector<uint8_t> b;
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(n >> (8 * i)));
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0);
  return b;
}

absl::Status OpenBytes(std::vector<uint8_t> bytes) {
  return SafetensorsFile::FromMapped(MappedFile::FromBytes(std::move(bytes))).status();
}

void ExpectRefused(const std::string& header, size_t data_bytes, const std::string& substr) {
  absl::Status s = OpenBytes(Raw(header, data_bytes));
  EXPECT_FALSE(s.ok()) << header;
  EXPECT_THAT(std::string(s.message()), HasSubstr(substr)) << header;
}

TEST(SafetensorsMalformedTest, ShortFile) {
  absl::Status s = OpenBytes({1, 2, 3});
  EXPECT_THAT(std::string(s.message()), HasSubstr("shorter than the 8-byte header length"));
}

TEST(SafetensorsMalformedTest, HeaderLengthHuge) {
  absl::Status s = OpenBytes(Raw("{}", 0, int64_t{1} << 40));
  EXPECT_THAT(std::string(s.message()), HasSubstr("exceeds the limit"));
}

TEST(SafetensorsMalformedTest, HeaderLengthPastFile) {
  absl::Status s = OpenBytes(Raw("{}", 0, 100));
  EXPECT_THAT(std::string(s.message()), HasSubstr("runs past the end of the file"));
}

TEST(SafetensorsMalformedTest, BadJson) { ExpectRefused("{\"a\": [1, 2", 0, "invalid JSON"); }

TEST(SafetensorsMalformedTest, HeaderNotObject) {
  ExpectRefused("[1, 2, 3]", 0, "header is not a JSON object");
}

TEST(SafetensorsMalformedTest, MissingFields) {
  ExpectRefused(R"({"x": {"shape": [1], "data_offsets": [0, 4]}})", 4,
                "tensor 'x' has no \"dtype\"");
  ExpectRefused(R"({"x": {"dtype": "F32", "data_offsets": [0, 4]}})", 4,
                "tensor 'x' has no \"shape\"");
  ExpectRefused(R"({"x": {"dtype": "F32", "shape": [1]}})", 4,
                "tensor 'x' has no \"data_offsets\"");
  ExpectRefused(R"({"x": 7})", 0, "tensor 'x' is not a JSON object");
}

TEST(SafetensorsMalformedTest, UnsupportedDtypeNamed) {
  ExpectRefused(R"({"x": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8,
                "F64 tensor 'x' is not supported");
  ExpectRefused(R"({"y": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}})", 1,
                "Q9 tensor 'y' is not supported");
}

TEST(SafetensorsMalformedTest, BadShape) {
  ExpectRefused(R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4,
                "is not a non-negative integer");
  ExpectRefused(
      R"({"x": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})", 4,
      "overflows 64 bits");
}

TEST(SafetensorsMalformedTest, OffsetsReversed) {
  ExpectRefused(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4,
                "are reversed");
}

TEST(SafetensorsMalformedTest, OffsetsPastEnd) {
  ExpectRefused(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4,
                "end past the data section (4 bytes)");
}

TEST(SafetensorsMalformedTest, ByteCountMismatch) {
  ExpectRefused(R"({"x": {"dtype": "F16", "shape": [3], "data_offsets": [0, 8]}})", 8,
                "byte count 8 does not match shape [3] x 2 bytes = 6");
}

TEST(SafetensorsMalformedTest, Overlap) {
  ExpectRefused(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                8, "tensors 'a' [0, 8) and 'b' [4, 8) overlap");
}

TEST(SafetensorsMalformedTest, DuplicateName) {
  ExpectRefused(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                    "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                2, "duplicate JSON key 'a'");
}

TEST(SafetensorsMalformedTest, MetadataNotObject) {
  ExpectRefused(R"({"__metadata__": [1]})", 0, "__metadata__ is not a JSON object");
}

// A folder holding an index (and optionally a valid shard), for the sharded-layout errors.
class ShardedFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir("st-malformed");
    ASSERT_TRUE(
        WriteSafetensors(dir_ + "/shard-1.safetensors", {{"a", StDtype::kU8, {2}, {1, 2}}}, {})
            .ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  absl::Status OpenWithIndex(const std::string& weight_map) {
    std::ofstream(dir_ + "/model.safetensors.index.json")
        << R"({"metadata": {}, "weight_map": )" << weight_map << "}";
    return SafetensorsModel::Open(dir_).status();
  }
  std::string dir_;
};

TEST_F(ShardedFolderTest, ValidIndexOpens) {
  EXPECT_TRUE(OpenWithIndex(R"({"a": "shard-1.safetensors"})").ok());
}

TEST_F(ShardedFolderTest, MissingShard) {
  absl::Status s = OpenWithIndex(R"({"a": "shard-2.safetensors"})");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("shard 'shard-2.safetensors' (for tensor 'a') is missing"));
}

TEST_F(ShardedFolderTest, TensorAbsentFromShard) {
  absl::Status s = OpenWithIndex(R"({"a": "shard-1.safetensors", "b": "shard-1.safetensors"})");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("tensor 'b' is mapped to shard 'shard-1.safetensors' but that shard "
                        "does not contain it"));
}

TEST_F(ShardedFolderTest, ShardEscapingFolder) {
  for (const char* bad : {"../shard-1.safetensors", "/etc/passwd", "sub/../../x"}) {
    absl::Status s = OpenWithIndex(absl::StrCat(R"({"a": ")", bad, "\"}"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("is not a file name inside the checkpoint"))
        << bad;
  }
}

TEST_F(ShardedFolderTest, IndexWithoutWeightMap) {
  std::ofstream(dir_ + "/model.safetensors.index.json") << R"({"metadata": {}})";
  EXPECT_THAT(std::string(SafetensorsModel::Open(dir_).status().message()),
              HasSubstr("no \"weight_map\""));
}

TEST_F(ShardedFolderTest, IndexBadJson) {
  std::ofstream(dir_ + "/model.safetensors.index.json") << R"({"weight_map": )";
  EXPECT_THAT(std::string(SafetensorsModel::Open(dir_).status().message()),
              HasSubstr("invalid JSON"));
}

TEST_F(ShardedFolderTest, BrokenShardReported) {
  std::ofstream(dir_ + "/shard-2.safetensors") << "abc";
  absl::Status s = OpenWithIndex(R"({"a": "shard-2.safetensors"})");
  EXPECT_THAT(std::string(s.message()), HasSubstr("shard-2.safetensors: file is 3 bytes"));
}

TEST(SafetensorsModelTest, EmptyFolder) {
  const std::string dir = testing::TempDir("st-empty");
  EXPECT_THAT(std::string(SafetensorsModel::Open(dir).status().message()),
              HasSubstr("has neither model.safetensors nor model.safetensors.index.json"));
  std::filesystem::remove_all(dir);
  EXPECT_EQ(SafetensorsModel::Open(dir + "/nope").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pinfer
