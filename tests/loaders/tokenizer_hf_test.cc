// Hugging Face tokenizer.json fixtures of ../shared/models: the Llama-2 vocabulary (BPE with
// byte fallback), a Llama-3-style and a Qwen2-style byte-level BPE, against listed ids.
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/hf_tokenizer.h"
#include "loaders/tokenizer.h"
#include "loaders/unicode.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using Ids = std::vector<int32_t>;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<Tokenizer> Load(const std::string& json_path, const std::string& config_path) {
  auto spec = TokenizerSpecFromHfFiles(ReadFile(json_path),
                                       config_path.empty() ? "" : ReadFile(config_path));
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return nullptr;
  auto tok = Tokenizer::Create(*std::move(spec));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

std::string RandomText(std::mt19937& rng, int n) {
  static const char* kPool[] = {" ", " ",    "  ", "\n", "\t", "the",      "Hello", "wörld", "中文",
                                "😀", "1234", ".",  "'s", "ß",  "\xC2\xA0", "\r\n",  "Ελλάδα"};
  std::string s;
  for (int i = 0; i < n; ++i) s += kPool[rng() % (sizeof(kPool) / sizeof(kPool[0]))];
  return s;
}

TEST(HfLlama2, HelloWorldAndRoundTrips) {
  PINFER_REQUIRE_MODEL(json, "hf/tiny-random-llama-f32/tokenizer.json");
  PINFER_REQUIRE_MODEL(cfg, "hf/tiny-random-llama-f32/tokenizer_config.json");
  auto tok = Load(json, cfg);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->spec().kind, TokenizerSpec::Kind::kSentencePiece);
  EXPECT_EQ(tok->n_vocab(), 32000);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_TRUE(tok->spec().add_bos);
  EXPECT_EQ(tok->Encode("Hello world", true), (Ids{1, 15043, 3186}));
  EXPECT_EQ(tok->Decode({1, 15043, 3186}), "Hello world");
  // An emoji has no piece in this vocabulary: four byte-fallback tokens <0xF0> <0x9F> ...
  const Ids emoji = tok->Encode("😀", false);
  ASSERT_GE(emoji.size(), 4u);
  EXPECT_EQ(std::vector<int32_t>(emoji.end() - 4, emoji.end()),
            (Ids{3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80}));
  for (const std::string text :
       {"Hello world", "  two  spaces", "line one\nline two\n", "naïve café, Ελλάδα, 中文",
        "emoji 😀 here", "tab\tand\r\nCRLF", ""}) {
    EXPECT_EQ(tok->Decode(tok->Encode(text, true)), text) << text;
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 100; ++i) {
    const std::string text = RandomText(rng, 1 + i % 25);
    EXPECT_EQ(tok->Decode(tok->Encode(text, true)), text) << text;
  }
  // "<s>" in text is plain text unless parse_special.
  EXPECT_EQ(tok->Encode("<s>Hi", false, true).front(), 1);
  EXPECT_NE(tok->Encode("<s>Hi", false, false).front(), 1);
}

TEST(HfLlama3Style, GoldenVector) {
  PINFER_REQUIRE_MODEL(json, "tokenizers/llama3-style-bpe2k/tokenizer.json");
  auto tok = Load(json, "");
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->spec().kind, TokenizerSpec::Kind::kBytePairGpt2);
  EXPECT_EQ(tok->spec().pre, "llama3");
  EXPECT_TRUE(tok->spec().ignore_merges);
  const std::string text =
      "I can see the sun. But even if I cannot see the sun, I know that it exists.";
  const Ids expected = {73,  503, 654, 262, 376, 110, 46,  690, 720, 428, 270, 1119, 654,
                        262, 376, 110, 44,  270, 686, 334, 312, 522, 511, 115, 46};
  EXPECT_EQ(tok->Encode(text, true), expected);  // the file defines no BOS
  EXPECT_EQ(tok->Decode(expected), text);
  std::mt19937 rng(5);
  for (int i = 0; i < 100; ++i) {
    const std::string t = RandomText(rng, 1 + i % 25);
    EXPECT_EQ(tok->Decode(tok->Encode(t, true)), t) << t;
  }
}

TEST(HfQwen2Style, ChatGoldenVector) {
  PINFER_REQUIRE_MODEL(json, "tokenizers/qwen2-style-bpe2k/tokenizer.json");
  auto tok = Load(json, "");
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->spec().pre, "qwen2");
  const std::string user =
      "Below is an instruction that describes a task. Write a response that appropriately "
      "completes the request.\n\n### Instruction:\nGenerate a realistic dating profile "
      "bio.\n\n### Response:\n";
  const std::string assistant =
      "I'm an outgoing and friendly person who loves spending time with friends and family. "
      "I'm also a big-time foodie and love trying out new restaurants and different cuisines. "
      "I'm a big fan of the arts and enjoy going to museums and galleries. I'm looking for "
      "someone who shares my interest in exploring new places, as well as someone who "
      "appreciates a good conversation over coffee.";
  const std::string text = "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n" +
                           assistant + "<|im_end|>";
  const Ids expected = {
      2001, 273,  105, 94,   33,   214,  174,  156,  194,  130,  197,  184, 446,  789,  113,  98,
      1914, 13,   346, 788,  98,   706,  102,  182,  184,  1916, 176,  762, 83,   113,  103,  874,
      269,  13,   94,  94,   2,    2,    2,    483,  197,  25,   94,   885, 98,   1226, 1960, 348,
      114,  1123, 399, 1583, 78,   13,   94,   94,   2,    2,    2,    360, 1733, 102,  182,  25,
      94,   2002, 94,  2001, 397,  251,  249,  94,   40,   1791, 194,  453, 70,   78,   114,  120,
      967,  176,  618, 628,  1275, 794,  294,  1095, 445,  212,  1356, 120, 1299, 13,   223,  1791,
      451,  98,   127, 181,  1047, 375,  915,  380,  120,  1448, 1732, 114, 453,  447,  1219, 64,
      187,  921,  120, 742,  107,  84,   122,  893,  13,   223,  1791, 98,  127,  181,  123,  124,
      131,  103,  744, 82,   120,  1506, 416,  114,  128,  1429, 182,  253, 82,   120,  163,  330,
      105,  262,  13,  223,  1791, 155,  1551, 171,  1951, 628,  296,  64,  237,  886,  1390, 130,
      883,  1678, 447, 306,  279,  113,  11,   215,  785,  215,  1951, 628, 378,  101,  66,   72,
      593,  98,   984, 208,  1580, 167,  510,  737,  318,  1278, 13,   2002};
  ASSERT_EQ(expected.size(), 188u);
  EXPECT_EQ(tok->Encode(text, true, /*parse_special=*/true), expected);
  EXPECT_TRUE(tok->IsEndOfGeneration(2002));  // <|im_end|>
  EXPECT_TRUE(tok->IsEndOfGeneration(2000));  // <|endoftext|>
  EXPECT_TRUE(tok->IsControl(2001));
  EXPECT_EQ(tok->Decode(expected), "user\n" + user + "\nassistant\n" + assistant);
}

TEST(HfTokenizer, Errors) {
  EXPECT_FALSE(TokenizerSpecFromHfFiles("not json", "").ok());
  EXPECT_FALSE(TokenizerSpecFromHfFiles(R"({"model": {"type": "Unigram", "vocab": []}})", "").ok());
  EXPECT_FALSE(TokenizerSpecFromHfFiles(R"({"model": {"type": "BPE", "vocab": {"a": 0},
      "merges": []}, "pre_tokenizer": {"type": "ByteLevel", "use_regex": 5}})",
                                        "")
                   .ok());
  const std::string ok_json =
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]},
          "pre_tokenizer": {"type": "ByteLevel", "use_regex": true}})";
  auto spec = TokenizerSpecFromHfFiles(ok_json, R"({"bos_token": "zz"})");
  EXPECT_FALSE(spec.ok());
  spec = TokenizerSpecFromHfFiles(ok_json, R"({"chat_template": "{{ x }}"})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->pre, "gpt2");
  EXPECT_EQ(spec->merges, std::vector<std::string>{"a b"});
  EXPECT_EQ(spec->chat_template, "{{ x }}");
}

}  // namespace
}  // namespace pinfer
