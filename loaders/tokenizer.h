// Tokenizers built from a model's vocabulary: SentencePiece-style ("llama": scores, byte
// fallback, dummy prefix) and byte-level BPE ("gpt2": merges, with a named pre-tokenizer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pinfer {

class GgufFile;

// Token attribute ids as GGUF's tokenizer.ggml.token_type stores them.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct TokenizerSpec {
  enum class Kind { kSentencePiece, kBytePairGpt2 };
  Kind kind = Kind::kSentencePiece;
  std::vector<std::string> tokens;  // id -> piece as stored ("▁the", "<0x0A>", "Ġthe")
  std::vector<float> scores;        // SentencePiece merge priority (empty for BPE)
  std::vector<TokenType> types;     // empty means all kNormal
  std::vector<std::string> merges;  // BPE: "a b" in priority order
  // BPE pre-tokenizer: "llama-bpe"/"llama3", "qwen2", "gpt2", "default".
  std::string pre = "default";
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  std::vector<int32_t> eog_ids;  // end-of-generation ids besides eos (eot, im_end, ...)
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;  // SentencePiece dummy prefix
  bool ignore_merges = false;    // BPE: a pre-token found whole in the vocab is one token
  std::string chat_template;     // Jinja chat template from the model, "" when none
};

// End-of-generation ids, by one rule for GGUF and Hugging Face files of the same model
// (llama.cpp's): eos, the ids the file names (GGUF's eot/eom keys, generation_config.json's
// eos_token_id list), and every token whose text is a conventional end-of-turn marker
// (<|eot_id|>, <|im_end|>, <end_of_turn>, <|endoftext|>, ...: kEndOfTurnTexts).
// AddEndOfGenerationId appends id to spec->eog_ids unless it is negative, eos, or already
// there (Tokenizer::Create refuses one outside the vocabulary); AddEndOfTurnTokens adds the
// marker tokens in the list's order (eog_ids.front() is then the model's end-of-turn token
// where it has one).
void AddEndOfGenerationId(TokenizerSpec* spec, int32_t id);
void AddEndOfTurnTokens(TokenizerSpec* spec);

class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec);
  // tokenizer.ggml.* keys of a GGUF file.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);
  virtual ~Tokenizer() = default;

  // add_special: BOS (and EOS) as the spec says. parse_special: text like "<|im_start|>" that
  // spells a control/user-defined token becomes that token instead of being split.
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special,
                                      bool parse_special = false) const = 0;
  // The bytes a token stands for (byte tokens resolved, "▁" / "Ġ" mapped back), no stripping.
  virtual std::string TokenBytes(int32_t id) const = 0;

  // Text of a sequence of ids as StreamDecoder prints it (control tokens dropped, the
  // SentencePiece dummy-prefix space after BOS removed, invalid UTF-8 as U+FFFD).
  std::string Decode(const std::vector<int32_t>& ids) const;

  const TokenizerSpec& spec() const { return spec_; }
  int32_t n_vocab() const { return (int32_t)spec_.tokens.size(); }
  int32_t bos() const { return spec_.bos_id; }
  int32_t eos() const { return spec_.eos_id; }
  bool IsEndOfGeneration(int32_t id) const;
  bool IsControl(int32_t id) const;

 protected:
  explicit Tokenizer(TokenizerSpec spec) : spec_(std::move(spec)) {}
  TokenizerSpec spec_;
};

// Turns generated ids into printable text: emits only complete UTF-8 characters (holding a
// partial character until the token that completes it), drops control tokens, and removes
// the dummy-prefix space of the first piece after BOS as SentencePiece decoding does.
class StreamDecoder {
 public:
  // previous: the token before the first one pushed, e.g. the last prompt token of a
  // continuation, so that its first piece keeps its leading space (" upon" after "Once");
  // -1 or BOS: the text starts here and loses the dummy-prefix space.
  explicit StreamDecoder(const Tokenizer& tok, int32_t previous = -1)
      : tok_(tok), prev_(previous) {}
  std::string Push(int32_t id);  // text now complete (may be empty)
  std::string Flush();           // whatever is held (invalid bytes become U+FFFD)

 private:
  const Tokenizer& tok_;
  std::string pending_;
  int32_t prev_;
};

}  // namespace pinfer
