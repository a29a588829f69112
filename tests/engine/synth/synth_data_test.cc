#include "engine/synth/synth_data.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pinfer {
namespace {

TEST(SynthVocabulary, SpecialByteAndWordTokens) {
  for (int n : {259, 512, 32000, 152064}) {
    absl::StatusOr<TokenizerSpec> v = SynthVocabulary(n);
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_EQ(static_cast<int>(v->tokens.size()), n);
    ASSERT_EQ(v->scores.size(), v->tokens.size());
    ASSERT_EQ(v->types.size(), v->tokens.size());
    EXPECT_EQ(std::set<std::string>(v->tokens.begin(), v->tokens.end()).size(), v->tokens.size())
        << "pieces must be unique";
    EXPECT_EQ(v->tokens[0], "<unk>");
    EXPECT_EQ(v->tokens[1], "<s>");
    EXPECT_EQ(v->tokens[2], "</s>");
    EXPECT_EQ(v->bos_id, 1);
    EXPECT_EQ(v->eos_id, 2);
    EXPECT_EQ(v->tokens[3], "<0x00>");
    EXPECT_EQ(v->tokens[3 + 0x0A], "<0x0A>");
    EXPECT_EQ(v->tokens[258], "<0xFF>");
    EXPECT_EQ(v->types[258], TokenType::kByte);
    EXPECT_EQ(v->types[1], TokenType::kControl);
  }
  TokenizerSpec v = *SynthVocabulary(1024);
  EXPECT_EQ(v.tokens[259], "\xE2\x96\x81");
  EXPECT_EQ(v.types[259], TokenType::kNormal);
  EXPECT_GT(v.scores[259], v.scores[1000]);  // earlier pieces win
  bool has_the = false;
  for (const std::string& t : v.tokens) has_the |= t == "\xE2\x96\x81the";
  EXPECT_TRUE(has_the);
  EXPECT_FALSE(SynthVocabulary(100).ok());
}

// llama.cpp refuses a model named phi3 whose vocabulary lacks <|endoftext|>; Phi-3's files
// hold it after the SentencePiece pieces. Other architectures' vocabularies are unchanged.
TEST(SynthVocabulary, Phi3EndsWithEndOfText) {
  const TokenizerSpec plain = *SynthVocabulary(512);
  const TokenizerSpec phi3 = *SynthVocabulary(512, "phi3");
  ASSERT_EQ(phi3.tokens.size(), 512u);
  ASSERT_EQ(phi3.types.size(), 512u);
  ASSERT_EQ(phi3.scores.size(), 512u);
  EXPECT_EQ(phi3.tokens.back(), "<|endoftext|>");
  EXPECT_EQ(phi3.types.back(), TokenType::kControl);
  EXPECT_EQ(std::vector<std::string>(phi3.tokens.begin(), phi3.tokens.end() - 1),
            std::vector<std::string>(plain.tokens.begin(), plain.tokens.end() - 1));
  EXPECT_EQ(SynthVocabulary(512, "llama")->tokens, plain.tokens);
  EXPECT_EQ(SynthVocabulary(512, "qwen3")->tokens, plain.tokens);
  EXPECT_TRUE(SynthVocabulary(260, "phi3").ok());
  EXPECT_FALSE(SynthVocabulary(259, "phi3").ok());
}

TEST(SynthRow, DeterministicPerSeedTensorAndRow) {
  std::vector<float> a(4096), b(4096), c(4096), d(4096);
  SynthRow(7, 3, 11, 0.0f, 0.02f, a.data(), 4096);
  SynthRow(7, 3, 11, 0.0f, 0.02f, b.data(), 4096);
  SynthRow(8, 3, 11, 0.0f, 0.02f, c.data(), 4096);
  SynthRow(7, 3, 12, 0.0f, 0.02f, d.data(), 4096);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
}

TEST(SynthRow, ApproximatelyNormalWithTheRequestedMoments) {
  constexpr int64_t kN = 1 << 20;
  std::vector<float> x(kN);
  SynthRow(1, 0, 0, 0.5f, 0.02f, x.data(), kN);
  double sum = 0, sq = 0;
  for (float v : x) sum += v;
  const double mean = sum / kN;
  for (float v : x) sq += (v - mean) * (v - mean);
  EXPECT_NEAR(mean, 0.5, 1e-4);
  EXPECT_NEAR(std::sqrt(sq / kN), 0.02, 2e-4);
  for (float v : x) ASSERT_LT(std::fabs(v - 0.5f), 0.02f * 3.5f);

  std::vector<float> ones(64);
  SynthRow(1, 0, 0, 1.0f, 0.0f, ones.data(), 64);
  for (float v : ones) EXPECT_FLOAT_EQ(v, 1.0f);
}

TEST(SynthInitFor, NormsBiasesMatrices) {
  EXPECT_EQ(SynthInitFor({"blk.0.attn_norm.weight", {8}, GgmlType::kF32, ""}).mean, 1.0f);
  EXPECT_EQ(SynthInitFor({"output_norm.weight", {8}, GgmlType::kF32, ""}).stddev, 0.0f);
  EXPECT_EQ(SynthInitFor({"blk.0.attn_q.bias", {8}, GgmlType::kF32, ""}).stddev, 0.01f);
  EXPECT_EQ(SynthInitFor({"blk.0.attn_q.weight", {8, 8}, GgmlType::kQ4_0, ""}).stddev, 0.02f);
}

}  // namespace
}  // namespace pinfer
