// Tokenizer::FromGguf on stories260K.gguf (SentencePiece "llama" vocabulary, llama2.c's
// reference tokenizations) and on a small byte-level BPE GGUF written in memory.
// Links only once loaders/gguf.cc (GgufFile, GgufWriter) is present.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/gguf.h"
#include "loaders/tokenizer.h"
#include "loaders/unicode.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using Ids = std::vector<int32_t>;

TEST(TokenizerGguf, Stories260K) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.spec().kind, TokenizerSpec::Kind::kSentencePiece);
  EXPECT_EQ(t.n_vocab(), 512);
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_EQ(t.spec().unk_id, 0);
  EXPECT_EQ(t.spec().pad_id, -1);  // stored as 0xFFFFFFFF
  EXPECT_TRUE(t.IsEndOfGeneration(2));
  EXPECT_TRUE(t.IsControl(1));

  const Ids once = {1, 403, 407, 261, 378};
  const Ids lily = {1, 317};
  const Ids hello = {1, 346, 306, 414, 263, 304, 341};
  EXPECT_EQ(t.Encode("Once upon a time", true), once);
  EXPECT_EQ(t.Encode("Lily", true), lily);
  EXPECT_EQ(t.Encode("Hello world", true), hello);
  EXPECT_EQ(t.Decode(once), "Once upon a time");
  EXPECT_EQ(t.Decode(lily), "Lily");
  EXPECT_EQ(t.Decode(hello), "Hello world");
  EXPECT_EQ(t.TokenBytes(403), " Once");

  // Streaming the reference story's first tokens prints it without a leading space.
  StreamDecoder dec(t);
  std::string out;
  for (int32_t id : once) out += dec.Push(id);
  out += dec.Flush();
  EXPECT_EQ(out, "Once upon a time");

  // Byte fallback: a character with no piece becomes <0xNN> tokens (ids 3..258) and back.
  const std::string text = "Lily 😀 ü\n";
  EXPECT_EQ(t.Decode(t.Encode(text, true)), text);
}

TEST(TokenizerGguf, BytePairFromWriter) {
  GgufWriter w;
  std::vector<std::string> tokens;
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    tokens.push_back(EncodeUtf8(printable ? b : next++));
  }
  tokens.push_back("he");          // 256
  tokens.push_back("<|eot_id|>");  // 257
  tokens.push_back("<|begin|>");   // 258
  std::vector<int32_t> types(tokens.size(), 1);
  types[257] = types[258] = 3;
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", "llama-bpe");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetI32Array("tokenizer.ggml.token_type", types);
  w.SetStringArray("tokenizer.ggml.merges", {"h e"});
  w.SetU32("tokenizer.ggml.bos_token_id", 258);
  w.SetU32("tokenizer.ggml.eos_token_id", 257);
  w.SetU32("tokenizer.ggml.eot_token_id", 257);
  w.SetU32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
  w.SetString("tokenizer.chat_template", "{{ messages }}");
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto file = GgufFile::FromBytes(*std::move(bytes));
  ASSERT_TRUE(file.ok()) << file.status();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->spec().kind, TokenizerSpec::Kind::kBytePairGpt2);
  EXPECT_EQ((*tok)->spec().chat_template, "{{ messages }}");
  // Llama-3 style adds BOS by default; " h" is the byte tokens for ' ' and 'h'.
  EXPECT_EQ((*tok)->Encode("he h", true), (Ids{258, 256, ' ', 'h'}));
  EXPECT_EQ((*tok)->Encode("he<|eot_id|>", false, true), (Ids{256, 257}));
  EXPECT_TRUE((*tok)->IsEndOfGeneration(257));
  EXPECT_EQ((*tok)->Decode((*tok)->Encode("he said: \"hi\"\n", true)), "he said: \"hi\"\n");
}

TEST(TokenizerGguf, MissingTokenizerIsAnError) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto file = GgufFile::FromBytes(*std::move(bytes));
  ASSERT_TRUE(file.ok()) << file.status();
  auto tok = Tokenizer::FromGguf(**file);
  EXPECT_FALSE(tok.ok());
}

}  // namespace
}  // namespace pinfer
