// Bit-layout tests: blocks are assembled byte by byte here, with bit twiddling written
// independently of the library, and DequantizeRow must give what each format's formula says.
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/fp16.h"
#include "loaders/quants.h"

namespace pinfer {
namespace {

// Deterministic code pattern: value k of a block gets code (k * mul + add) mod levels.
int Code(int k, int mul, int add, int levels) { return (k * mul + add) % levels; }

void ExpectNear(const std::vector<double>& want, const std::vector<float>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 * (1.0 + std::fabs(want[i]))) << "value " << i;
  }
}

TEST(QuantsLayout, Q4_0) {
  BlockQ4_0 b[2];
  std::vector<double> want;
  const float scales[2] = {0.5f, -0.125f};
  for (int i = 0; i < 2; ++i) {
    b[i].d = Fp32ToFp16(scales[i]);
    int c[32];
    for (int k = 0; k < 32; ++k) c[k] = Code(k + i, 7, 3, 16);
    for (int j = 0; j < 16; ++j) b[i].qs[j] = static_cast<uint8_t>(c[j] + 16 * c[j + 16]);
    for (int k = 0; k < 32; ++k) want.push_back(double(scales[i]) * (c[k] - 8));
  }
  std::vector<float> got(64);
  DequantizeRow(GgmlType::kQ4_0, b, got.data(), 64);
  ExpectNear(want, got);
}

TEST(QuantsLayout, Q4_1) {
  BlockQ4_1 b;
  b.d = Fp32ToFp16(0.25f);
  b.m = Fp32ToFp16(-1.5f);
  int c[32];
  for (int k = 0; k < 32; ++k) c[k] = Code(k, 5, 1, 16);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(c[j] + 16 * c[j + 16]);
  std::vector<double> want;
  for (int k = 0; k < 32; ++k) want.push_back(0.25 * c[k] - 1.5);
  std::vector<float> got(32);
  DequantizeRow(GgmlType::kQ4_1, &b, got.data(), 32);
  ExpectNear(want, got);
}

// Q5_0 / Q5_1: bit 4 of value k lives in bit (k % 8) of qh byte k / 8.
template <typename Block>
void FillQ5(Block* b, const int* c) {
  std::memset(b->qh, 0, 4);
  for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>((c[j] % 16) + 16 * (c[j + 16] % 16));
  for (int k = 0; k < 32; ++k) {
    if (c[k] >= 16) b->qh[k / 8] |= static_cast<uint8_t>(1 << (k % 8));
  }
}

TEST(QuantsLayout, Q5_0) {
  BlockQ5_0 b;
  b.d = Fp32ToFp16(0.75f);
  int c[32];
  for (int k = 0; k < 32; ++k) c[k] = Code(k, 11, 5, 32);
  FillQ5(&b, c);
  std::vector<double> want;
  for (int k = 0; k < 32; ++k) want.push_back(0.75 * (c[k] - 16));
  std::vector<float> got(32);
  DequantizeRow(GgmlType::kQ5_0, &b, got.data(), 32);
  ExpectNear(want, got);
}

TEST(QuantsLayout, Q5_1) {
  BlockQ5_1 b;
  b.d = Fp32ToFp16(0.125f);
  b.m = Fp32ToFp16(2.0f);
  int c[32];
  for (int k = 0; k < 32; ++k) c[k] = Code(k, 13, 2, 32);
  FillQ5(&b, c);
  std::vector<double> want;
  for (int k = 0; k < 32; ++k) want.push_back(0.125 * c[k] + 2.0);
  std::vector<float> got(32);
  DequantizeRow(GgmlType::kQ5_1, &b, got.data(), 32);
  ExpectNear(want, got);
}

TEST(QuantsLayout, Q8_0) {
  BlockQ8_0 b;
  b.d = Fp32ToFp16(0.01f);
  const double d = Fp16ToFp32(b.d);
  std::vector<double> want;
  for (int k = 0; k < 32; ++k) {
    const int q = Code(k, 37, 0, 256) - 128;
    b.qs[k] = static_cast<int8_t>(q);
    want.push_back(d * q);
  }
  std::vector<float> got(32);
  DequantizeRow(GgmlType::kQ8_0, &b, got.data(), 32);
  ExpectNear(want, got);
}

// Q4_K / Q5_K scale bytes: 0-3 hold sc[0..3] in bits 0-5 and bits 4-5 of sc[4..7] in bits
// 6-7; 4-7 the same for the mins; 8-11 hold the low 4 bits of sc[4..7] (low nibble) and of
// m[4..7] (high nibble).
void PackScalesByHand(const int* sc, const int* m, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

constexpr int kSc[8] = {1, 63, 17, 32, 48, 5, 60, 33};
constexpr int kMin[8] = {62, 0, 31, 16, 7, 63, 34, 50};

// Value v of a Q4_K/Q5_K super-block: chunk v / 64 of 32 bytes, byte v % 32, high nibble when
// v % 64 >= 32; its 5th bit (Q5_K) is bit 2 * (v / 64) + (v % 64 >= 32) of qh[v % 32].
template <typename Block, bool kFiveBit>
void CheckQK(GgmlType t) {
  Block b;
  std::memset(&b, 0, sizeof(b));
  b.d = Fp32ToFp16(0.0625f);
  b.dmin = Fp32ToFp16(0.03125f);
  PackScalesByHand(kSc, kMin, b.scales);
  std::vector<double> want;
  for (int v = 0; v < 256; ++v) {
    const int code = kFiveBit ? Code(v, 19, 7, 32) : Code(v, 7, 2, 16);
    const int chunk = v / 64, high = (v % 64) >= 32, byte = 32 * chunk + v % 32;
    b.qs[byte] |= static_cast<uint8_t>((code & 15) << (4 * high));
    if constexpr (kFiveBit) {
      if (code & 16) b.qh[v % 32] |= static_cast<uint8_t>(1 << (2 * chunk + high));
    }
    want.push_back(0.0625 * kSc[v / 32] * code - 0.03125 * kMin[v / 32]);
  }
  std::vector<float> got(256);
  DequantizeRow(t, &b, got.data(), 256);
  ExpectNear(want, got);
}

TEST(QuantsLayout, Q4_K) { CheckQK<BlockQ4_K, false>(GgmlType::kQ4_K); }
TEST(QuantsLayout, Q5_K) { CheckQK<BlockQ5_K, true>(GgmlType::kQ5_K); }

// Q6_K value v: half h = v / 128, r = v % 128, group g = r / 32, l = r % 32. Low 4 bits in
// ql[64h + l + 32 * (g % 2)] (high nibble when g >= 2), top 2 bits in bits 2g..2g+1 of
// qh[32h + l]; scale scales[8h + r / 16]; x = d * scale * (q - 32).
TEST(QuantsLayout, Q6_K) {
  BlockQ6_K b;
  std::memset(&b, 0, sizeof(b));
  b.d = Fp32ToFp16(0.02f);
  const double d = Fp16ToFp32(b.d);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(Code(j, 53, 9, 256) - 128);
  std::vector<double> want;
  for (int v = 0; v < 256; ++v) {
    const int q = Code(v, 23, 4, 64);
    const int h = v / 128, r = v % 128, g = r / 32, l = r % 32;
    b.ql[64 * h + l + 32 * (g % 2)] |= static_cast<uint8_t>((q & 15) << (g >= 2 ? 4 : 0));
    b.qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * g));
    want.push_back(d * b.scales[8 * h + r / 16] * (q - 32));
  }
  std::vector<float> got(256);
  DequantizeRow(GgmlType::kQ6_K, &b, got.data(), 256);
  ExpectNear(want, got);
}

TEST(QuantsLayout, PlainFloats) {
  const float src[4] = {1.0f, -2.5f, 0.0f, 65504.0f};
  uint16_t h[4], bf[4];
  for (int i = 0; i < 4; ++i) {
    h[i] = Fp32ToFp16(src[i]);
    bf[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(src[i]) >> 16);
  }
  EXPECT_EQ(h[0], 0x3c00);
  EXPECT_EQ(h[1], 0xc100);
  float got[4];
  DequantizeRow(GgmlType::kF16, h, got, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], src[i]);
  DequantizeRow(GgmlType::kBF16, bf, got, 3);  // 65504 is not a bfloat16 value
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i], src[i]);
  DequantizeRow(GgmlType::kF32, src, got, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], src[i]);
}

}  // namespace
}  // namespace pinfer
