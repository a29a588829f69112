// Malformed GGUF images: each must be rejected with an error naming the problem (and where
// it is), never a crash, a huge allocation or an out-of-bounds read.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loaders/gguf.h"
#include "tests/loaders/gguf_bytes.h"

namespace pinfer {
namespace {

using ::pinfer::testing::GgufBytes;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kHuge = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kF32 = 0, kQ8_0 = 8, kQ2_K = 10;

// Parses bytes that must be rejected; returns the error message ("<accepted>" otherwise).
std::string Error(const std::vector<uint8_t>& bytes) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(bytes);
  if (f.ok()) return "<accepted>";
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(f.status().message());
}

// A file with one tensor: header, tensor info, padding to 32, data_bytes of data.
std::vector<uint8_t> OneTensor(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset,
                               size_t data_bytes) {
  GgufBytes b;
  b.Header(3, 1, 0).Tensor("w", dims, type, offset).PadTo(32).Zeros(data_bytes);
  return b.bytes;
}

std::vector<uint8_t> ValidFile() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetU32("general.alignment", 16);
  w.SetStringArray("tokenizer.ggml.tokens", {"a", "bc", "def"});
  w.Set("nested",
        GgufValue::Array(GgufType::kArray, {GgufValue::Array(GgufType::kU8, {GgufValue::U8(1)})}));
  EXPECT_TRUE(w.AddTensor("x", GgmlType::kF32, {4, 2}, std::vector<uint8_t>(32, 1)).ok());
  EXPECT_TRUE(w.AddTensor("y", GgmlType::kQ8_0, {32}, std::vector<uint8_t>(34, 2)).ok());
  return *w.WriteToBytes();
}

TEST(GgufMalformed, ValidBaselinesParse) {
  EXPECT_EQ(Error(ValidFile()), "<accepted>");
  EXPECT_EQ(Error(OneTensor({8}, kF32, 0, 32)), "<accepted>");
}

TEST(GgufMalformed, TruncatedAtEveryLength) {
  const std::vector<uint8_t> full = ValidFile();
  for (size_t len = 0; len < full.size(); ++len) {
    const std::string msg = Error(std::vector<uint8_t>(full.begin(), full.begin() + len));
    EXPECT_THAT(msg, AllOf(StartsWith("GGUF <memory>: "),
                           AnyOf(HasSubstr("runs past the end of the file"), HasSubstr("bad magic"),
                                 HasSubstr("cannot fit"), HasSubstr("could hold"))))
        << "truncated at " << len;
  }
}

TEST(GgufMalformed, EmptyFileAndBadMagic) {
  EXPECT_THAT(Error({}), HasSubstr("bad magic '' at byte 0: not a GGUF file"));
  GgufBytes b;
  b.U32(0x46554747 + 1).U32(3).U64(0).U64(0);
  EXPECT_THAT(Error(b.bytes), HasSubstr("bad magic 'HGUF'"));
}

TEST(GgufMalformed, UnsupportedVersions) {
  GgufBytes v1, v99, big_endian;
  v1.Header(1, 0, 0);
  v99.Header(99, 0, 0);
  big_endian.Header(0x03000000, 0, 0);
  EXPECT_THAT(Error(v1.bytes), HasSubstr("GGUF version 1 at byte 4 is not supported"));
  EXPECT_THAT(Error(v99.bytes), HasSubstr("unsupported GGUF version 99 at byte 4"));
  EXPECT_THAT(Error(big_endian.bytes), HasSubstr("big-endian"));
}

TEST(GgufMalformed, HugeCounts) {
  GgufBytes tensors, kvs, both;
  tensors.Header(3, kHuge, 0).Zeros(64);
  kvs.Header(3, 0, kHuge).Zeros(64);
  both.Header(3, 2, 3).Zeros(64);  // 2 x 32 + 3 x 13 > 64
  EXPECT_THAT(
      Error(tensors.bytes),
      HasSubstr("tensor count 18446744073709551615 at byte 8 is more than the remaining 64"));
  EXPECT_THAT(Error(kvs.bytes), HasSubstr("metadata count 18446744073709551615 at byte 16"));
  EXPECT_THAT(Error(both.bytes), HasSubstr("cannot fit in the remaining 64 bytes"));
}

TEST(GgufMalformed, HugeStringLengths) {
  GgufBytes key, value, name;
  key.Header(3, 0, 1).U64(kHuge).Zeros(32);
  value.Header(3, 0, 1).Str("k").U32(8).U64(kHuge).Zeros(16);
  name.Header(3, 1, 0).U64(1u << 30).Zeros(40);
  EXPECT_THAT(Error(key.bytes), HasSubstr("metadata entry 0: key length 18446744073709551615 at "
                                          "byte 24 runs past the end of the file (64 bytes)"));
  EXPECT_THAT(Error(value.bytes), HasSubstr("metadata key 'k': string length"));
  EXPECT_THAT(Error(name.bytes), HasSubstr("tensor name length 1073741824 at byte 24 runs past"));
}

TEST(GgufMalformed, HugeArrayLength) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("arr").U32(9).U32(4).U64(kHuge / 2).Zeros(64);
  EXPECT_THAT(Error(b.bytes),
              HasSubstr("array length 9223372036854775807 of u32 at byte 43 (at least 4 bytes "
                        "each) runs past the end"));
}

TEST(GgufMalformed, ArrayElementsPastTheMetadataLimit) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("arr").U32(9).U32(0).U64(kGgufMaxArrayElements + 1);
  b.Zeros(kGgufMaxArrayElements + 64);
  EXPECT_THAT(Error(b.bytes), HasSubstr("past the limit of 4194304"));
}

TEST(GgufMalformed, ArraysNestedTooDeep) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("deep").U32(9);
  for (int d = 0; d < kGgufMaxArrayDepth + 2; ++d) b.U32(9).U64(1);
  b.U32(0).U64(0).Zeros(16);
  EXPECT_THAT(Error(b.bytes), HasSubstr("arrays nested deeper than 8 levels"));
}

TEST(GgufMalformed, UnknownValueTypes) {
  GgufBytes scalar, elem;
  scalar.Header(3, 0, 1).Str("k").U32(13).U32(0);
  elem.Header(3, 0, 1).Str("k").U32(9).U32(77).U64(0);
  EXPECT_THAT(Error(scalar.bytes), HasSubstr("unknown metadata value type 13 at byte 33"));
  EXPECT_THAT(Error(elem.bytes), HasSubstr("unknown array element type 77 at byte 37"));
}

TEST(GgufMalformed, BoolNeitherZeroNorOne) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("k").U32(7).U8(2).Zeros(8);
  EXPECT_THAT(Error(b.bytes), HasSubstr("bool value 2 at byte 37 is neither 0 nor 1"));
}

TEST(GgufMalformed, DuplicateKey) {
  GgufBytes b;
  b.Header(3, 0, 2).KvU32("k", 1).KvU32("k", 2).PadTo(32);
  EXPECT_THAT(Error(b.bytes),
              HasSubstr("duplicate metadata key 'k' at byte 41 (first at byte 24)"));
}

TEST(GgufMalformed, AlignmentZeroNotPowerOfTwoOrWrongType) {
  GgufBytes zero, odd, str, u64;
  zero.Header(3, 0, 1).KvU32("general.alignment", 0).PadTo(32);
  odd.Header(3, 0, 1).KvU32("general.alignment", 24).PadTo(32);
  str.Header(3, 0, 1).KvStr("general.alignment", "32").PadTo(32);
  u64.Header(3, 0, 1).Str("general.alignment").U32(10).U64(32).PadTo(32);
  EXPECT_THAT(Error(zero.bytes), HasSubstr("general.alignment 0 at byte 53 is not a non-zero"));
  EXPECT_THAT(Error(odd.bytes), HasSubstr("general.alignment 24 at byte 53 is not a non-zero"));
  EXPECT_THAT(Error(str.bytes), HasSubstr("general.alignment at byte 53 is string; it must be"));
  EXPECT_THAT(Error(u64.bytes), HasSubstr("is u64; it must be a u32"));
}

TEST(GgufMalformed, UnknownAndUnsupportedTensorTypes) {
  EXPECT_THAT(Error(OneTensor({8}, 99, 0, 32)),
              HasSubstr("tensor 'w': unknown tensor type id 99 at byte 45"));
  EXPECT_THAT(Error(OneTensor({256}, kQ2_K, 0, 96)),
              AllOf(HasSubstr("tensor 'w': tensor type Q2_K (id 10) at byte 45 is not supported"),
                    HasSubstr("supported types: F32, F16")));
}

TEST(GgufMalformed, DimensionCounts) {
  EXPECT_THAT(Error(OneTensor({}, kF32, 0, 32)),
              HasSubstr("tensor 'w': dimension count 0 at byte 33 is outside 1..4"));
  EXPECT_THAT(Error(OneTensor({1, 1, 1, 1, 1}, kF32, 0, 32)),
              HasSubstr("dimension count 5 at byte 33 is outside 1..4"));
}

TEST(GgufMalformed, ZeroDimension) {
  EXPECT_THAT(Error(OneTensor({8, 0}, kF32, 0, 32)), HasSubstr("dimension 1 at byte 45 is 0"));
}

TEST(GgufMalformed, DimensionProductOverflow) {
  EXPECT_THAT(Error(OneTensor({1u << 31, 1u << 31, 4}, kF32, 0, 32)),
              HasSubstr("dimension 2 (4) at byte 53 makes the element count overflow"));
  EXPECT_THAT(Error(OneTensor({kHuge}, kF32, 0, 32)), HasSubstr("element count overflow"));
  // Elements fit in int64 but bytes (x 4) do not.
  EXPECT_THAT(Error(OneTensor({uint64_t{1} << 62}, kF32, 0, 32)), HasSubstr("overflows 64 bits"));
}

TEST(GgufMalformed, RowNotAMultipleOfTheBlockSize) {
  EXPECT_THAT(Error(OneTensor({33}, kQ8_0, 0, 96)),
              HasSubstr("row length 33 at byte 37 is not a multiple of Q8_0's block size 32"));
}

TEST(GgufMalformed, MisalignedOffset) {
  EXPECT_THAT(
      Error(OneTensor({1}, kF32, 4, 32)),
      HasSubstr("tensor 'w': data offset 4 at byte 49 is not a multiple of the alignment 32"));
}

TEST(GgufMalformed, TensorPastTheEndOfTheFile) {
  EXPECT_THAT(Error(OneTensor({16}, kF32, 0, 32)),
              HasSubstr("tensor 'w': data (64 bytes at data offset 0, offset field at byte 49, "
                        "data section at byte 64) runs past the end of the file (96 bytes)"));
  EXPECT_THAT(Error(OneTensor({1}, kF32, kHuge - 31, 32)), HasSubstr("runs past the end"));
}

TEST(GgufMalformed, OverlappingTensors) {
  GgufBytes b;
  b.Header(3, 2, 0).Tensor("a", {16}, kF32, 0).Tensor("b", {8}, kF32, 32).PadTo(32).Zeros(128);
  EXPECT_THAT(Error(b.bytes), HasSubstr("tensor 'b': data at offset 32 (offset field at byte 82) "
                                        "overlaps tensor 'a', which covers data bytes [0, 64)"));
}

TEST(GgufMalformed, DuplicateTensorName) {
  GgufBytes b;
  b.Header(3, 2, 0).Tensor("a", {8}, kF32, 0).Tensor("a", {8}, kF32, 32).PadTo(32).Zeros(64);
  EXPECT_THAT(Error(b.bytes), HasSubstr("duplicate tensor name 'a' at byte 57 (first at byte 24)"));
}

TEST(GgufMalformed, DataSectionPastTheEnd) {
  GgufBytes b;
  b.Header(3, 0, 1).KvU32("general.alignment", 4096);
  EXPECT_THAT(Error(b.bytes),
              HasSubstr("data section start 4096 (header end 57 rounded up to the "
                        "alignment 4096) runs past the end of the file (57 bytes)"));
}

TEST(GgufMalformed, TruncatedTensorInfo) {
  GgufBytes b;
  b.Header(3, 1, 0).Str("w").U32(2).U64(4).U64(4).U32(kF32);  // the offset is cut off
  EXPECT_THAT(Error(b.bytes), HasSubstr("tensor 'w': tensor data offset (8 bytes) at byte 57 runs "
                                        "past the end of the file (57 bytes)"));
}

}  // namespace
}  // namespace pinfer
