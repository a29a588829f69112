// Tokenizers built from small hand-made specs: SentencePiece merging by score with byte
// fallback, BPE merging by rank, special tokens, StreamDecoder, random UTF-8 round trips.
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/tokenizer.h"
#include "loaders/unicode.h"

namespace pinfer {
namespace {

using Ids = std::vector<int32_t>;
const std::string kMark = "\xE2\x96\x81";  // U+2581

// <unk> <s> </s>, 256 byte tokens (ids 3..258), then the given pieces with their scores.
TokenizerSpec SpmSpec(const std::vector<std::pair<std::string, float>>& pieces) {
  TokenizerSpec s;
  s.kind = TokenizerSpec::Kind::kSentencePiece;
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  s.scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    snprintf(buf, sizeof(buf), "<0x%02X>", b);
    s.tokens.push_back(buf);
    s.types.push_back(TokenType::kByte);
    s.scores.push_back(0);
  }
  for (const auto& [p, score] : pieces) {
    s.tokens.push_back(p);
    s.types.push_back(TokenType::kNormal);
    s.scores.push_back(score);
  }
  s.unk_id = 0;
  s.bos_id = 1;
  s.eos_id = 2;
  return s;
}

std::unique_ptr<Tokenizer> Make(TokenizerSpec spec) {
  auto t = Tokenizer::Create(std::move(spec));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(SentencePiece, MergesByScoreWithByteFallback) {
  // ids 259.. : ▁, a, b, c, ▁a, ab, ▁ab
  auto tok = Make(SpmSpec({{kMark, -1},
                           {"a", -2},
                           {"b", -3},
                           {"c", -4},
                           {kMark + "a", -1},
                           {"ab", -2},
                           {kMark + "ab", -0.5f}}));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->Encode("ab", true), (Ids{1, 265}));
  EXPECT_EQ(tok->Encode("abc", false), (Ids{265, 262}));
  EXPECT_EQ(tok->Encode("b ab", false), (Ids{259, 261, 265}));
  // "é" has no piece: its two UTF-8 bytes become <0xC3> <0xA9>.
  EXPECT_EQ(tok->Encode("é", false), (Ids{259, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok->Decode(tok->Encode("é ab", true)), "é ab");
  EXPECT_EQ(tok->TokenBytes(265), " ab");
  EXPECT_EQ(tok->TokenBytes(3 + 0x0A), "\n");
}

TEST(SentencePiece, UnknownWithoutByteTokens) {
  TokenizerSpec s;
  s.kind = TokenizerSpec::Kind::kSentencePiece;
  s.tokens = {"<unk>", "<s>", "</s>", kMark, "x"};
  s.scores = {0, 0, 0, -1, -1};
  s.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl, TokenType::kNormal,
             TokenType::kNormal};
  s.unk_id = 0;
  s.bos_id = 1;
  auto tok = Make(s);
  EXPECT_EQ(tok->Encode("xéx", true), (Ids{1, 3, 4, 0, 4}));
}

TEST(SentencePiece, NoSpacePrefixAndEos) {
  auto spec = SpmSpec({{kMark, -1}, {"a", -2}});
  spec.add_space_prefix = false;
  spec.add_eos = true;
  auto tok = Make(spec);
  EXPECT_EQ(tok->Encode("a a", true), (Ids{1, 260, 259, 260, 2}));
  EXPECT_EQ(tok->Encode("a", false), (Ids{260}));
}

// Byte-level vocabulary: ids 0..255 are the GPT-2 characters of bytes 0..255.
TokenizerSpec BpeSpec(const std::vector<std::string>& merges) {
  TokenizerSpec s;
  s.kind = TokenizerSpec::Kind::kBytePairGpt2;
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    s.tokens.push_back(EncodeUtf8(printable ? b : next++));
  }
  for (const std::string& m : merges) {
    std::string merged = m;
    merged.erase(m.find(' '), 1);
    s.tokens.push_back(merged);
    s.merges.push_back(m);
  }
  s.pre = "llama3";
  s.add_bos = false;
  return s;
}

TEST(BytePair, MergesByRank) {
  // ranks: "l o" first, so "hello" becomes hel + lo rather than using "l l".
  auto tok = Make(BpeSpec({"l o", "h e", "l l", "he l", "Ġ w"}));
  ASSERT_TRUE(tok);
  const int32_t lo = 256, he = 257, hel = 259, sp_w = 260;
  EXPECT_EQ(tok->Encode("hello", true), (Ids{hel, lo}));
  EXPECT_EQ(tok->Encode("hello wo", false), (Ids{hel, lo, sp_w, 'o'}));
  EXPECT_EQ(tok->Encode("he", false), (Ids{he}));
  EXPECT_EQ(tok->TokenBytes(sp_w), " w");
  EXPECT_EQ(tok->Decode(tok->Encode("hello wo\n\xE4\xB8\xAD", false)), "hello wo\n\xE4\xB8\xAD");
}

TEST(BytePair, IgnoreMergesEmitsWholeWords) {
  auto spec = BpeSpec({"h e"});
  spec.tokens.push_back("hey");  // no merge makes it
  auto tok = Make(spec);
  EXPECT_EQ(tok->Encode("hey", false), (Ids{256, 'y'}));
  spec.ignore_merges = true;
  tok = Make(spec);
  EXPECT_EQ(tok->Encode("hey", false), (Ids{257}));
}

TEST(BytePair, RejectsBadSpecs) {
  auto spec = BpeSpec({});
  spec.pre = "no-such-pre";
  EXPECT_FALSE(Tokenizer::Create(spec).ok());
  spec = BpeSpec({});
  spec.merges = {"nospace"};
  EXPECT_FALSE(Tokenizer::Create(spec).ok());
  spec = BpeSpec({});
  spec.bos_id = 100000;
  EXPECT_FALSE(Tokenizer::Create(spec).ok());
  spec = BpeSpec({});
  spec.scores = {1.0f};
  EXPECT_FALSE(Tokenizer::Create(spec).ok());
  EXPECT_FALSE(Tokenizer::Create(TokenizerSpec{}).ok());
}

TEST(SpecialTokens, ParseSpecialSplitsControlTokens) {
  auto spec = BpeSpec({"h i"});
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  const int32_t start = (int32_t)spec.tokens.size();
  spec.tokens.insert(spec.tokens.end(), {"<|im_start|>", "<|im_end|>", "<tool>", "<|im"});
  spec.types.insert(spec.types.end(), {TokenType::kControl, TokenType::kControl,
                                       TokenType::kUserDefined, TokenType::kControl});
  spec.eos_id = start + 1;
  spec.eog_ids = {start};
  auto tok = Make(spec);
  const int32_t hi = 256;
  EXPECT_EQ(tok->Encode("<|im_start|>hi<|im_end|>", false, true), (Ids{start, hi, start + 1}));
  // Without parse_special the text is ordinary characters; user-defined tokens still split.
  const Ids plain = tok->Encode("<|im_start|>hi", false, false);
  EXPECT_EQ(plain.front(), '<');
  EXPECT_EQ(tok->Decode(plain), "<|im_start|>hi");
  EXPECT_EQ(tok->Encode("a<tool>b", false, false), (Ids{'a', start + 2, 'b'}));
  EXPECT_TRUE(tok->IsEndOfGeneration(start + 1));
  EXPECT_TRUE(tok->IsEndOfGeneration(start));
  EXPECT_FALSE(tok->IsEndOfGeneration(hi));
  EXPECT_TRUE(tok->IsControl(start));
  EXPECT_FALSE(tok->IsControl(start + 2));
  EXPECT_EQ(tok->Decode({hi, start + 1}), "hi");  // control tokens are dropped
}

TEST(StreamDecoder, HoldsPartialCharacters) {
  auto tok = Make(BpeSpec({}));
  StreamDecoder dec(*tok);
  // "é" = C3 A9 and "😀" = F0 9F 98 80, one byte per token.
  EXPECT_EQ(dec.Push('a'), "a");
  EXPECT_EQ(dec.Push(0xC3), "");
  EXPECT_EQ(dec.Push(0xA9), "é");
  EXPECT_EQ(dec.Push(0xF0), "");
  EXPECT_EQ(dec.Push(0x9F), "");
  EXPECT_EQ(dec.Push(0x98), "");
  EXPECT_EQ(dec.Push(0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(dec.Flush(), "");
  // A truncated character at the end becomes one U+FFFD; an impossible byte at once.
  EXPECT_EQ(dec.Push(0xE4), "");
  EXPECT_EQ(dec.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(dec.Push(0xFF), "\xEF\xBF\xBD");
  EXPECT_EQ(dec.Push(0xC3), "");
  EXPECT_EQ(dec.Push('x'), "\xEF\xBF\xBDx");
}

TEST(StreamDecoder, SentencePieceStripsDummyPrefixAfterBos) {
  auto tok = Make(SpmSpec({{kMark, -1}, {"a", -2}, {kMark + "a", -1}}));
  StreamDecoder dec(*tok);
  EXPECT_EQ(dec.Push(1), "");
  EXPECT_EQ(dec.Push(261), "a");
  EXPECT_EQ(dec.Push(261), " a");
  EXPECT_EQ(dec.Push(2), "");
  EXPECT_EQ(dec.Flush(), "");
}

std::string RandomUtf8(std::mt19937& rng, int n) {
  static const uint32_t kPool[] = {' ',  ' ',    ' ',     '\n',   '\t',   'a', 'b', 'e',
                                   'h',  'l',    'o',     'Z',    '0',    '7', '.', '\'',
                                   0xE9, 0x4E2D, 0x1F600, 0x3000, 0x0663, 0xA0};
  std::string s;
  for (int i = 0; i < n; ++i) {
    const uint32_t r = rng() % 40;
    uint32_t cp = r < 22 ? kPool[r] : 0x20 + rng() % 0x2FFF;
    if (cp == 0x2581) cp = 'x';  // SentencePiece's space mark decodes as a space
    AppendUtf8(cp, &s);
  }
  return s;
}

TEST(RoundTrip, RandomUtf8) {
  auto bpe = Make(BpeSpec({"l o", "h e", "Ġ a", "e l"}));
  auto spm = Make(SpmSpec({{kMark, -1}, {"a", -2}, {"b", -3}, {kMark + "a", -1}, {"ab", -2}}));
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const std::string text = RandomUtf8(rng, 1 + i % 40);
    EXPECT_EQ(bpe->Decode(bpe->Encode(text, true)), text);
    EXPECT_EQ(spm->Decode(spm->Encode(text, true)), text);
  }
}

}  // namespace
}  // namespace pinfer
