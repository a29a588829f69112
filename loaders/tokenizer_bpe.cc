// Byte-level BPE tokenizer (GGUF "gpt2"): a named pre-tokenizer splits the text, each piece's
// bytes are mapped to printable characters (GPT-2's byte-to-unicode table), then merged by
// rank. Input is assumed to be NFC already (Qwen2's tokenizer.json normalises to NFC; ASCII
// and precomposed text are unaffected, and no NFC tables are carried here).
#include "loaders/pretokenize.h"
#include "loaders/tokenizer_impl.h"
#include "loaders/unicode.h"

namespace pinfer::tokenizer_internal {
namespace {

// GPT-2's byte -> code point table: printable Latin-1 bytes map to themselves, the other 68
// bytes to U+0100 onwards in byte order.
std::array<uint32_t, 256> ByteToCodepoint() {
  std::array<uint32_t, 256> map{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    map[b] = printable ? b : next++;
  }
  return map;
}

class BytePairTokenizer final : public TokenizerBase {
 public:
  explicit BytePairTokenizer(TokenizerSpec spec) : TokenizerBase(std::move(spec)) {}

  absl::Status Init() {
    auto pre = PreTokenizerFromName(spec_.pre);
    if (!pre.ok()) return pre.status();
    pre_ = *pre;
    const auto map = ByteToCodepoint();
    for (uint32_t b = 0; b < 256; ++b) {
      byte_text_[b] = EncodeUtf8(map[b]);
      codepoint_to_byte_.emplace(map[b], static_cast<uint8_t>(b));
    }
    if (auto s = InitCommon(); !s.ok()) return s;
    return BuildMergeRanks();
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override {
    std::vector<int32_t> out;
    if (add_special && spec_.add_bos && spec_.bos_id >= 0) out.push_back(spec_.bos_id);
    std::string mapped;
    for (const Fragment& f : SplitSpecial(text, parse_special)) {
      if (f.token >= 0) {
        out.push_back(f.token);
        continue;
      }
      for (std::string_view word : PreTokenize(pre_, f.text)) {
        mapped.clear();
        for (char c : word) mapped += byte_text_[static_cast<uint8_t>(c)];
        EncodeWord(mapped, &out);
      }
    }
    if (add_special && spec_.add_eos && spec_.eos_id >= 0) out.push_back(spec_.eos_id);
    return out;
  }

 protected:
  std::string PieceBytes(int32_t id) const override {
    const std::string& s = spec_.tokens[id];
    const TokenType t = type(id);
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) {
      return s;  // added tokens are stored as plain text, not byte-mapped
    }
    std::string out;
    size_t pos = 0;
    while (pos < s.size()) {
      const size_t start = pos;
      const uint32_t cp = DecodeUtf8(s, &pos);
      auto it = codepoint_to_byte_.find(cp);
      if (it != codepoint_to_byte_.end()) {
        out += static_cast<char>(it->second);
      } else {
        out.append(s, start, pos - start);
      }
    }
    return out;
  }

 private:
  void EncodeWord(const std::string& word, std::vector<int32_t>* out) const {
    if (spec_.ignore_merges) {
      auto it = pieces_.find(word);
      if (it != pieces_.end()) {
        out->push_back(it->second);
        return;
      }
    }
    std::vector<Symbol> syms = CharSymbols(word, pieces_);
    MergeSymbols(syms, [&](const Symbol& a, const Symbol& b, float* pri, int32_t* id) {
      return MergeRank(a.id, b.id, pri, id);
    });
    for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
      if (syms[i].id >= 0) {
        out->push_back(syms[i].id);
      } else if (spec_.unk_id >= 0) {
        out->push_back(spec_.unk_id);
      }
    }
  }

  PreTokenizer pre_ = PreTokenizer::kGpt2;
  std::array<std::string, 256> byte_text_;
  std::unordered_map<uint32_t, uint8_t> codepoint_to_byte_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeBytePairGpt2(TokenizerSpec spec) {
  auto tok = std::unique_ptr<BytePairTokenizer>(new BytePairTokenizer(std::move(spec)));
  if (auto s = tok->Init(); !s.ok()) return s;
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace pinfer::tokenizer_internal
