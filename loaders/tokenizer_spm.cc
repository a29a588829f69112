// SentencePiece-style tokenizer (GGUF "llama"): dummy-prefix space, spaces as U+2581,
// greedy merging of adjacent symbols by the merged piece's score (llama.cpp's approach), or
// by merge rank when the spec carries merges instead of scores (Hugging Face's Llama-2
// tokenizer.json), then byte fallback to <0xNN> tokens, else the unknown token.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "loaders/tokenizer_impl.h"

namespace pinfer::tokenizer_internal {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

// "<0xNN>" -> NN, else -1.
int ParseByteToken(const std::string& s) {
  if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = s[i];
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

class SentencePieceTokenizer final : public TokenizerBase {
 public:
  explicit SentencePieceTokenizer(TokenizerSpec spec) : TokenizerBase(std::move(spec)) {}

  absl::Status Init() {
    if (spec_.scores.empty() && spec_.merges.empty()) {
      return absl::InvalidArgumentError(
          "tokenizer: a SentencePiece vocabulary needs scores (GGUF) or merges (tokenizer.json)");
    }
    byte_ids_.fill(-1);
    for (int32_t id = 0; id < n_vocab(); ++id) {
      const int b = ParseByteToken(spec_.tokens[id]);
      const TokenType t = type(id);
      if (b >= 0 && (t == TokenType::kByte || spec_.types.empty()) && byte_ids_[b] < 0) {
        byte_ids_[b] = id;
      }
    }
    if (auto s = InitCommon(); !s.ok()) return s;
    use_ranks_ = spec_.scores.empty();
    if (use_ranks_) return BuildMergeRanks();
    return absl::OkStatus();
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override {
    std::vector<int32_t> out;
    if (add_special && spec_.add_bos && spec_.bos_id >= 0) out.push_back(spec_.bos_id);
    bool prev_special = true;
    for (const Fragment& f : SplitSpecial(text, parse_special)) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      std::string escaped;
      escaped.reserve(f.text.size() + 8);
      if (spec_.add_space_prefix && prev_special) escaped += kSpaceMark;
      for (char c : f.text) {
        if (c == ' ') {
          escaped += kSpaceMark;
        } else {
          escaped += c;
        }
      }
      EncodeWord(escaped, &out);
      prev_special = false;
    }
    if (add_special && spec_.add_eos && spec_.eos_id >= 0) out.push_back(spec_.eos_id);
    return out;
  }

 protected:
  std::string PieceBytes(int32_t id) const override {
    const std::string& s = spec_.tokens[id];
    const TokenType t = type(id);
    if (t == TokenType::kByte || (spec_.types.empty() && ParseByteToken(s) >= 0)) {
      const int b = ParseByteToken(s);
      if (b >= 0) return std::string(1, static_cast<char>(b));
    }
    if (t == TokenType::kControl || t == TokenType::kUnknown) return s;
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      if (s.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
        out += ' ';
        i += kSpaceMark.size();
      } else {
        out += s[i++];
      }
    }
    return out;
  }

 private:
  void EncodeWord(const std::string& word, std::vector<int32_t>* out) const {
    std::vector<Symbol> syms = CharSymbols(word, pieces_);
    if (use_ranks_) {
      MergeSymbols(syms, [&](const Symbol& a, const Symbol& b, float* pri, int32_t* id) {
        return MergeRank(a.id, b.id, pri, id);
      });
    } else {
      MergeSymbols(syms, [&](const Symbol& a, const Symbol& b, float* pri, int32_t* id) {
        auto it = pieces_.find(std::string_view(word).substr(a.start, a.len + b.len));
        if (it == pieces_.end()) return false;
        *id = it->second;
        *pri = spec_.scores[it->second];
        return true;
      });
    }
    for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
      const Symbol& s = syms[i];
      if (s.id >= 0) {
        out->push_back(s.id);
        continue;
      }
      bool all_bytes = true;
      for (uint32_t k = 0; k < s.len; ++k) {
        if (byte_ids_[static_cast<uint8_t>(word[s.start + k])] < 0) all_bytes = false;
      }
      if (all_bytes) {
        for (uint32_t k = 0; k < s.len; ++k) {
          out->push_back(byte_ids_[static_cast<uint8_t>(word[s.start + k])]);
        }
      } else if (spec_.unk_id >= 0) {
        out->push_back(spec_.unk_id);
      }
    }
  }

  std::array<int32_t, 256> byte_ids_;
  bool use_ranks_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeSentencePiece(TokenizerSpec spec) {
  auto tok = std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(spec)));
  if (auto s = tok->Init(); !s.ok()) return s;
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace pinfer::tokenizer_internal
