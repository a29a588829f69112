// GPTQ / AWQ: header fixtures, real Falcon3 slices against their reference libraries' results,
// Q4_1 repacking, act-order, and refusals.
#include "loaders/gptq.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loaders/fp16.h"
#include "loaders/json_strict.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using ::testing::HasSubstr;

// Test-only Q4_1 row dequantizer (x = d * q + m; low nibbles values 0..15, high 16..31).
std::vector<float> DequantQ4_1Row(const BlockQ4_1* row, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = Fp16ToFp32(row[b].d), m = Fp16ToFp32(row[b].m);
    for (int j = 0; j < 16; ++j) {
      out[b * 32 + j] = d * (row[b].qs[j] & 0xF) + m;
      out[b * 32 + j + 16] = d * (row[b].qs[j] >> 4) + m;
    }
  }
  return out;
}

// Every repacked row matches the float reference within the fp16 rounding of m.
void ExpectRepackMatches(const PackedLinear& l, const Q4_1Weights& q, const std::vector<float>& w) {
  const int64_t nb = q.cols / 32;
  int64_t checked = 0;
  for (int64_t o = 0; o < q.rows; ++o) {
    const std::vector<float> row = DequantQ4_1Row(&q.blocks[o * nb], q.cols);
    for (int64_t k = 0; k < q.cols; ++k) {
      const int64_t i = q.perm.empty() ? k : q.perm[k];
      const float ref = w[o * q.cols + i];
      const float m = std::fabs(Fp16ToFp32(q.blocks[o * nb + k / 32].m));
      // |m| * 2^-11 for rounding m (taken on the rounded m, hence 2^-10), 2^-25 for subnormals,
      // plus float evaluation error.
      const float tol = m * 0x1p-10f + 0x1p-25f + 1e-6f * std::fabs(ref);
      ASSERT_NEAR(row[k], ref, tol) << l.name << " o=" << o << " k=" << k;
      ++checked;
    }
  }
  EXPECT_EQ(checked, q.rows * q.cols);
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

StTensor View(const std::string& name, StDtype dt, std::vector<int64_t> shape, const uint8_t* p) {
  StTensor t{name, dt, std::move(shape), p, 0};
  t.nbytes = static_cast<size_t>(t.numel()) * StDtypeSize(dt);
  return t;
}

void CheckHeaderFixture(const std::string& st_path, const std::string& json_path,
                        QuantMethod method) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(st_path);
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<nlohmann::json> want = ReadJsonFile(json_path);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ((*f)->data_offset(), 8 + (*want)["header_size"].get<size_t>());
  std::map<std::string, std::string> meta = (*want)["metadata"];
  EXPECT_EQ((*f)->metadata(), meta);
  ASSERT_EQ((*f)->tensors().size(), (*want)["tensors"].size());
  for (const nlohmann::json& w : (*want)["tensors"]) {
    const StTensor* t = (*f)->Find(w["name"].get<std::string>());
    ASSERT_NE(t, nullptr) << w["name"];
    EXPECT_EQ(StDtypeName(t->dtype), w["dtype"].get<std::string>());
    EXPECT_EQ(t->shape, w["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(t->data - (*f)->tensors().front().data, w["data_offsets"][0].get<int64_t>());
    EXPECT_EQ(t->nbytes, w["data_offsets"][1].get<size_t>() - w["data_offsets"][0].get<size_t>());
  }
  QuantConfig cfg;
  cfg.method = method;
  cfg.group_size = 32;
  cfg.zero_offset = method == QuantMethod::kGptq ? 1 : 0;
  const std::string p = "model.layers.0";
  absl::StatusOr<PackedLinear> l =
      MakePackedLinear(cfg, p, *(*f)->Find(p + ".qweight"), *(*f)->Find(p + ".qzeros"),
                       *(*f)->Find(p + ".scales"), (*f)->Find(p + ".g_idx"));
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->in_features, 64);
  EXPECT_EQ(l->out_features, 32);
  EXPECT_EQ(l->n_groups, 2);
  EXPECT_EQ(l->g_idx.has_value(), method == QuantMethod::kGptq);
}

TEST(GptqTest, HeaderFixturesMatchExpected) {
  PINFER_REQUIRE_MODEL(gptq, "gptq-awq/gptq.safetensors");
  PINFER_REQUIRE_MODEL(awq, "gptq-awq/awq.safetensors");
  CheckHeaderFixture(gptq, testing::ModelPath("gptq-awq/gptq.expected.json"), QuantMethod::kGptq);
  CheckHeaderFixture(awq, testing::ModelPath("gptq-awq/awq.expected.json"), QuantMethod::kAwq);
}

// Compares our dequantization with the reference library's BF16 result, stored [out][in] or
// [in][out] (`transposed`; the falcon3 slices store [in][out], the torch layout of their
// dequantize functions). Tolerance: one bf16 ulp, 2^-8 relative. Rounding our float result to
// bf16 alone would need half that, but the references round intermediates too (about 28% of
// values differ by more than half an ulp, none by more than one).
int64_t CountMismatches(const std::vector<float>& w, const uint8_t* expected, int64_t out,
                        int64_t in, bool transposed) {
  int64_t bad = 0;
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      uint16_t h;
      std::memcpy(&h, expected + 2 * (transposed ? i * out + o : o * in + i), 2);
      const float e = Bf16ToFp32(h), got = w[o * in + i];
      if (std::fabs(got - e) > std::fabs(e) * 0x1p-8f + 1e-30f) ++bad;
    }
  }
  return bad;
}

TEST(GptqTest, Falcon3GptqSliceMatchesReference) {
  PINFER_REQUIRE_MODEL(path, "gptq-awq/falcon3_1b_int4.bin");
  const std::vector<uint8_t> bin = ReadAll(path);
  ASSERT_GE(bin.size(), 44u);
  uint32_t h[11];
  std::memcpy(h, bin.data(), sizeof(h));
  ASSERT_EQ(h[0], 4u);
  const int64_t gs = h[1], in = h[2], out = h[3];
  ASSERT_EQ(h[5], 1u);  // has g_idx
  ASSERT_EQ(44 + h[6] + h[7] + h[8] + h[9] + h[10], bin.size());
  const uint8_t* p = bin.data() + 44;
  const StTensor qw = View("qweight", StDtype::kI32, {in / 8, out}, p);
  const StTensor sc = View("scales", StDtype::kF16, {in / gs, out}, p += h[6]);
  const StTensor qz = View("qzeros", StDtype::kI32, {in / gs, out / 8}, p += h[7]);
  const StTensor gi = View("g_idx", StDtype::kI32, {in}, p += h[8]);
  const uint8_t* expected = p + h[9];
  QuantConfig cfg;  // GPTQ v1: stored zeros are zero - 1
  cfg.group_size = static_cast<int>(gs);
  absl::StatusOr<PackedLinear> l = MakePackedLinear(cfg, "falcon3.gate_proj", qw, qz, sc, &gi);
  ASSERT_TRUE(l.ok()) << l.status();
  const std::vector<float> w = DequantizePacked(*l);
  EXPECT_EQ(CountMismatches(w, expected, out, in, /*transposed=*/true), 0);

  absl::StatusOr<Q4_1Weights> q = RepackToQ4_1(*l);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE(q->perm.empty()) << "falcon3's g_idx is trivial";
  ExpectRepackMatches(*l, *q, w);

  cfg.zero_offset = 0;  // without the "+1" the reference is not reproduced
  absl::StatusOr<PackedLinear> v2 = MakePackedLinear(cfg, "falcon3.gate_proj", qw, qz, sc, &gi);
  ASSERT_TRUE(v2.ok());
  EXPECT_GT(CountMismatches(DequantizePacked(*v2), expected, out, in, true), 1000);
}

TEST(GptqTest, Falcon3AwqSliceMatchesReference) {
  PINFER_REQUIRE_MODEL(path, "gptq-awq/falcon3_1b_awq.bin");
  const std::vector<uint8_t> bin = ReadAll(path);
  ASSERT_GE(bin.size(), 36u);
  uint32_t h[9];
  std::memcpy(h, bin.data(), sizeof(h));
  ASSERT_EQ(h[0], 4u);
  const int64_t gs = h[1], in = h[2], out = h[3];
  ASSERT_EQ(36 + h[5] + h[6] + h[7] + h[8], bin.size());
  const uint8_t* p = bin.data() + 36;
  const StTensor qw = View("qweight", StDtype::kI32, {in, out / 8}, p);
  const StTensor sc = View("scales", StDtype::kF16, {in / gs, out}, p += h[5]);
  const StTensor qz = View("qzeros", StDtype::kI32, {in / gs, out / 8}, p += h[6]);
  const uint8_t* expected = p + h[7];
  QuantConfig cfg;
  cfg.method = QuantMethod::kAwq;
  cfg.zero_offset = 0;
  cfg.group_size = static_cast<int>(gs);
  absl::StatusOr<PackedLinear> l = MakePackedLinear(cfg, "falcon3.awq", qw, qz, sc, nullptr);
  ASSERT_TRUE(l.ok()) << l.status();
  const std::vector<float> w = DequantizePacked(*l);
  EXPECT_EQ(CountMismatches(w, expected, out, in, /*transposed=*/true), 0);
  absl::StatusOr<Q4_1Weights> q = RepackToQ4_1(*l);
  ASSERT_TRUE(q.ok()) << q.status();
  ExpectRepackMatches(*l, *q, w);
}

// Packs nibbles v[0..7] into an int32 word, lowest nibble first.
int32_t Pack8(const int* v) {
  uint32_t w = 0;
  for (int j = 0; j < 8; ++j) w |= static_cast<uint32_t>(v[j] & 0xF) << (4 * j);
  return static_cast<int32_t>(w);
}

std::vector<uint8_t> I32Bytes(const std::vector<int32_t>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A GPTQ layer with act-order built from known q, zeros and scales: in 128, out 16, group 32,
// g_idx a shuffle giving each group 32 columns.
struct ActOrderLayer {
  static constexpr int kIn = 128, kOut = 16, kGs = 32, kGroups = kIn / kGs;
  std::vector<int> q, zero;  // q[o][i], zero[g][o] (true zeros)
  std::vector<float> scale;  // [g][o], fp16-representable
  std::vector<int32_t> g_idx;
  std::vector<uint8_t> qweight, qzeros, scales, gidx_bytes;

  explicit ActOrderLayer(uint32_t seed) {
    std::mt19937 rng(seed);
    q.resize(kOut * kIn);
    for (int& v : q) v = static_cast<int>(rng() % 16);
    zero.resize(kGroups * kOut);
    for (int& z : zero) z = 1 + static_cast<int>(rng() % 15);  // stored as z - 1 (v1)
    scale.resize(kGroups * kOut);
    std::vector<uint16_t> sh;
    for (float& s : scale) {
      sh.push_back(Fp32ToFp16(0.001f + 0.01f * (rng() % 1000) / 1000.0f));
      s = Fp16ToFp32(sh.back());
    }
    for (int i = 0; i < kIn; ++i) g_idx.push_back(i / kGs);
    std::shuffle(g_idx.begin(), g_idx.end(), rng);
    std::vector<int32_t> qw(kIn / 8 * kOut), qz(kGroups * kOut / 8);
    for (int r = 0; r < kIn / 8; ++r) {
      for (int o = 0; o < kOut; ++o) {
        int v[8];
        for (int j = 0; j < 8; ++j) v[j] = q[o * kIn + r * 8 + j];
        qw[r * kOut + o] = Pack8(v);
      }
    }
    for (int g = 0; g < kGroups; ++g) {
      for (int c = 0; c < kOut / 8; ++c) {
        int v[8];
        for (int j = 0; j < 8; ++j) v[j] = zero[g * kOut + c * 8 + j] - 1;
        qz[g * kOut / 8 + c] = Pack8(v);
      }
    }
    qweight = I32Bytes(qw);
    qzeros = I32Bytes(qz);
    gidx_bytes = I32Bytes(g_idx);
    scales.resize(sh.size() * 2);
    std::memcpy(scales.data(), sh.data(), scales.size());
  }
  absl::StatusOr<PackedLinear> Make(const QuantConfig& cfg) const {
    const StTensor gi = View("l.g_idx", StDtype::kI32, {kIn}, gidx_bytes.data());
    return MakePackedLinear(cfg, "l",
                            View("l.qweight", StDtype::kI32, {kIn / 8, kOut}, qweight.data()),
                            View("l.qzeros", StDtype::kI32, {kGroups, kOut / 8}, qzeros.data()),
                            View("l.scales", StDtype::kF16, {kGroups, kOut}, scales.data()), &gi);
  }
  QuantConfig Config() const {
    QuantConfig c;
    c.group_size = kGs;
    c.desc_act = true;
    return c;
  }
};

TEST(GptqTest, ActOrderRepackWithPermutation) {
  const ActOrderLayer a(7);
  absl::StatusOr<PackedLinear> l = a.Make(a.Config());
  ASSERT_TRUE(l.ok()) << l.status();
  const std::vector<float> w = DequantizePacked(*l);
  for (int o = 0; o < a.kOut; ++o) {
    for (int i = 0; i < a.kIn; ++i) {
      const int g = a.g_idx[i];
      ASSERT_EQ(w[o * a.kIn + i],
                a.scale[g * a.kOut + o] * (a.q[o * a.kIn + i] - a.zero[g * a.kOut + o]));
    }
  }
  absl::StatusOr<Q4_1Weights> q = RepackToQ4_1(*l);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->perm.size(), static_cast<size_t>(a.kIn));
  ExpectRepackMatches(*l, *q, w);

  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(a.kIn), xp(a.kIn);
  for (float& v : x) v = u(rng);
  for (int k = 0; k < a.kIn; ++k) xp[k] = x[q->perm[k]];
  for (int o = 0; o < a.kOut; ++o) {
    const std::vector<float> row = DequantQ4_1Row(&q->blocks[o * a.kIn / 32], a.kIn);
    double want = 0, got = 0, mag = 0;
    for (int i = 0; i < a.kIn; ++i) {
      want += static_cast<double>(w[o * a.kIn + i]) * x[i];
      got += static_cast<double>(row[i]) * xp[i];
      mag +=
          std::fabs(w[o * a.kIn + i] * x[i]) + std::fabs(Fp16ToFp32(q->blocks[o * a.kIn / 32].m));
    }
    EXPECT_NEAR(got, want, mag * 0x1p-10) << "output " << o;
  }
}

TEST(GptqTest, RefusesUnsupportedLayouts) {
  const ActOrderLayer a(3);
  QuantConfig cfg = a.Config();
  cfg.bits = 8;
  EXPECT_THAT(std::string(a.Make(cfg).status().message()), HasSubstr("bits = 8 is not supported"));

  // Group size 16 against tensors made for 32: the zeros and scales no longer fit.
  cfg = a.Config();
  cfg.group_size = 16;
  EXPECT_THAT(std::string(a.Make(cfg).status().message()),
              HasSubstr("expected [8, 2] for qweight [16, 16] with group_size 16"));

  // A g_idx whose groups do not fill 32-column blocks: group sizes 31/33 after a swap.
  ActOrderLayer b(5);
  for (int i = 0; i < b.kIn; ++i) b.g_idx[i] = i / b.kGs;
  b.g_idx[31] = 1;
  b.gidx_bytes = I32Bytes(b.g_idx);
  absl::StatusOr<PackedLinear> l = b.Make(b.Config());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_THAT(std::string(RepackToQ4_1(*l).status().message()), HasSubstr("mixes groups"));

  // Out-of-range g_idx.
  b.g_idx[0] = 9;
  b.gidx_bytes = I32Bytes(b.g_idx);
  EXPECT_THAT(std::string(b.Make(b.Config()).status().message()), HasSubstr("outside [0, 4)"));
}

TEST(GptqTest, GroupSizeNotMultipleOf32Refused) {
  // in 64, out 8, group 16: 4 groups.
  std::vector<uint8_t> qw(8 * 8 * 4, 0), qz(4 * 1 * 4, 0), sc(4 * 8 * 2, 0);
  QuantConfig cfg;
  cfg.group_size = 16;
  absl::StatusOr<PackedLinear> l =
      MakePackedLinear(cfg, "g16", View("w", StDtype::kI32, {8, 8}, qw.data()),
                       View("z", StDtype::kI32, {4, 1}, qz.data()),
                       View("s", StDtype::kF16, {4, 8}, sc.data()), nullptr);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_THAT(std::string(RepackToQ4_1(*l).status().message()),
              HasSubstr("group size 16 and input width 64 must be multiples of 32"));
}

TEST(QuantConfigTest, ParsesAndRefuses) {
  absl::StatusOr<QuantConfig> c = ParseQuantConfigJson(
      R"({"quant_method": "gptq", "bits": 4, "group_size": 64, "desc_act": true, "sym": false})",
      "t");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, QuantMethod::kGptq);
  EXPECT_EQ(c->group_size, 64);
  EXPECT_TRUE(c->desc_act);
  EXPECT_FALSE(c->sym);
  EXPECT_EQ(c->zero_offset, 1);
  c = ParseQuantConfigJson(R"({"bits": 4, "group_size": 128, "checkpoint_format": "gptq_v2"})",
                           "t");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->zero_offset, 0);
  c = ParseQuantConfigJson(
      R"({"w_bit": 4, "q_group_size": 128, "zero_point": true, "version": "GEMM"})", "t",
      QuantMethod::kAwq);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, QuantMethod::kAwq);
  EXPECT_EQ(c->zero_offset, 0);
  for (int bits : {3, 8}) {
    absl::Status s = ParseQuantConfigJson(absl::StrCat(R"({"quant_method": "gptq", "bits": )", bits,
                                                       R"(, "group_size": 128})"),
                                          "quantize_config.json")
                         .status();
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(absl::StrCat("quantize_config.json: gptq with bits = ", bits,
                                       " is not supported")));
  }
  EXPECT_THAT(std::string(ParseQuantConfigJson(R"({"quant_method": "awq", "version": "gemv"})", "t")
                              .status()
                              .message()),
              HasSubstr("AWQ version 'gemv'"));
  EXPECT_THAT(
      std::string(ParseQuantConfigJson(R"({"quant_method": "exl2"})", "t").status().message()),
      HasSubstr("quant_method 'exl2' is not supported"));
}

}  // namespace
}  // namespace pinfer
