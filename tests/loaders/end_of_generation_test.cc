// End-of-generation ids follow one rule for GGUF and Hugging Face files of the same model
// (loaders/tokenizer.h): EOS, the ids the file names, and the tokens whose text is a
// conventional end-of-turn marker, in the marker list's order.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/gguf.h"
#include "loaders/hf_tokenizer.h"
#include "loaders/tokenizer.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using Ids = std::vector<int32_t>;

TEST(EndOfGeneration, MarkerTokensInTheListsOrder) {
  TokenizerSpec spec;
  spec.tokens = {"a", "<|endoftext|>", "b", "<|im_end|>", "</s>", "<|im_start|>", "<|eot_id|>x"};
  spec.eos_id = 4;  // "</s>", a marker too, but already EOS
  AddEndOfTurnTokens(&spec);
  EXPECT_EQ(spec.eog_ids, (Ids{3, 1}));  // <|im_end|> before <|endoftext|>; no <|im_start|>
  AddEndOfGenerationId(&spec, 1);        // already there
  AddEndOfGenerationId(&spec, 4);        // EOS
  AddEndOfGenerationId(&spec, -1);       // none
  EXPECT_EQ(spec.eog_ids, (Ids{3, 1}));
  AddEndOfGenerationId(&spec, 2);  // a file may name any token
  EXPECT_EQ(spec.eog_ids, (Ids{3, 1, 2}));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A Qwen2-style vocabulary (EOS <|endoftext|>, and <|im_end|> ending each turn) read from its
// tokenizer.json and from a GGUF file holding the same vocabulary with only EOS named (as a
// converter that writes no eot key leaves it): the same end-of-generation ids.
TEST(EndOfGeneration, SameIdsFromGgufAndHfFiles) {
  PINFER_REQUIRE_MODEL(json, "tokenizers/qwen2-style-bpe2k/tokenizer.json");
  auto hf = TokenizerSpecFromHfFiles(ReadFile(json), R"({"eos_token": "<|endoftext|>"})");
  ASSERT_TRUE(hf.ok()) << hf.status();
  ASSERT_EQ(hf->eos_id, 2000);
  EXPECT_EQ(hf->eog_ids, (Ids{2002}));  // <|im_end|>
  GgufWriter w;
  w.SetString("general.architecture", "qwen2");
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", hf->pre);
  w.SetStringArray("tokenizer.ggml.tokens", hf->tokens);
  w.SetStringArray("tokenizer.ggml.merges", hf->merges);
  std::vector<int32_t> types;
  for (TokenType t : hf->types) types.push_back(static_cast<int32_t>(t));
  w.SetI32Array("tokenizer.ggml.token_type", types);
  w.SetU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(hf->eos_id));
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto file = GgufFile::FromBytes(std::move(*bytes));
  ASSERT_TRUE(file.ok()) << file.status();
  auto gguf = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ((*gguf)->spec().eog_ids, hf->eog_ids);
  EXPECT_TRUE((*gguf)->IsEndOfGeneration(2000));
  EXPECT_TRUE((*gguf)->IsEndOfGeneration(2002));
  EXPECT_FALSE((*gguf)->IsEndOfGeneration(2001));  // <|im_start|>
}

}  // namespace
}  // namespace pinfer
