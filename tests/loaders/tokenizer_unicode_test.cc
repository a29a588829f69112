// Unicode classes, UTF-8 helpers and the hand-written pre-tokenizer matchers.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/pretokenize.h"
#include "loaders/unicode.h"

namespace pinfer {
namespace {

TEST(Unicode, Classes) {
  EXPECT_TRUE(IsUnicodeLetter('a'));
  EXPECT_TRUE(IsUnicodeLetter('Z'));
  EXPECT_TRUE(IsUnicodeLetter(0xE9));    // é
  EXPECT_TRUE(IsUnicodeLetter(0x4E2D));  // 中
  EXPECT_TRUE(IsUnicodeLetter(0x3042));  // あ
  EXPECT_FALSE(IsUnicodeLetter('1'));
  EXPECT_FALSE(IsUnicodeLetter(0x1F600));  // emoji
  EXPECT_TRUE(IsUnicodeNumber('7'));
  EXPECT_TRUE(IsUnicodeNumber(0x0663));  // Arabic-Indic three (Nd)
  EXPECT_TRUE(IsUnicodeNumber(0x2163));  // Roman numeral four (Nl)
  EXPECT_TRUE(IsUnicodeNumber(0x00BD));  // one half (No)
  EXPECT_FALSE(IsUnicodeNumber('x'));
  for (uint32_t cp : {0x09u, 0x0Au, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x2003u, 0x3000u}) {
    EXPECT_TRUE(IsUnicodeWhitespace(cp)) << cp;
  }
  EXPECT_FALSE(IsUnicodeWhitespace(0x1C));  // Python's isspace() says yes; White_Space no
  EXPECT_FALSE(IsUnicodeWhitespace('a'));
}

TEST(Unicode, Utf8RoundTrip) {
  for (uint32_t cp : {0x24u, 0xA2u, 0x939u, 0x20ACu, 0xD55Cu, 0x10348u, 0x1F600u, 0x10FFFFu}) {
    const std::string s = EncodeUtf8(cp);
    size_t pos = 0;
    EXPECT_EQ(DecodeUtf8(s, &pos), cp);
    EXPECT_EQ(pos, s.size());
  }
  EXPECT_EQ(EncodeUtf8(0xD800), "\xEF\xBF\xBD");  // surrogate -> U+FFFD
}

TEST(Unicode, MalformedInputAdvancesOneByte) {
  for (std::string bad : {std::string("\xC3"), std::string("\xFF"), std::string("\xC0\xAF"),
                          std::string("\xED\xA0\x80"), std::string("\xE2\x82")}) {
    size_t pos = 0;
    EXPECT_EQ(DecodeUtf8(bad, &pos), kReplacementChar);
    EXPECT_EQ(pos, 1u);
  }
}

std::vector<std::string> Split(PreTokenizer kind, const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view p : PreTokenize(kind, text)) out.emplace_back(p);
  return out;
}

using V = std::vector<std::string>;

TEST(PreTokenize, Llama3) {
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "Hello world's 12345  \n\n  x!!"),
            (V{"Hello", " world", "'s", " ", "123", "45", "  \n\n", " ", " x", "!!"}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "I'M here"), (V{"I", "'M", " here"}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "a ... b.\r\n"), (V{"a", " ...", " b", ".\r\n"}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "\tfoo  "), (V{"\tfoo", "  "}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "naïve 中文"), (V{"naïve", " 中文"}));
}

TEST(PreTokenize, Qwen2SplitsDigitsOneByOne) {
  EXPECT_EQ(Split(PreTokenizer::kQwen2, "in 2024!"), (V{"in", " ", "2", "0", "2", "4", "!"}));
}

TEST(PreTokenize, Gpt2) {
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "Hello world's 12345  \n\n  x!!"),
            (V{"Hello", " world", "'s", " 12345", "  \n\n ", " x", "!!"}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "I'M"), (V{"I", "'", "M"}));
}

TEST(PreTokenize, CoversInputExactly) {
  const std::string text = "x\xFF y \xE2\x82 z\n\n 42 \xF0\x9F\x98\x80!";
  for (auto kind : {PreTokenizer::kGpt2, PreTokenizer::kLlama3, PreTokenizer::kQwen2}) {
    std::string joined;
    for (const auto& p : Split(kind, text)) {
      EXPECT_FALSE(p.empty());
      joined += p;
    }
    EXPECT_EQ(joined, text);
  }
}

TEST(PreTokenize, Names) {
  EXPECT_EQ(*PreTokenizerFromName("llama-bpe"), PreTokenizer::kLlama3);
  EXPECT_EQ(*PreTokenizerFromName("qwen2"), PreTokenizer::kQwen2);
  EXPECT_EQ(*PreTokenizerFromName("default"), PreTokenizer::kGpt2);
  EXPECT_FALSE(PreTokenizerFromName("deepseek-coder").ok());
}

}  // namespace
}  // namespace pinfer
