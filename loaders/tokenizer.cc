// Tokenizer validation and dispatch, the shared base (special tokens, merge ranks, decoded
// bytes) and StreamDecoder.
#include "loaders/tokenizer.h"

#include <algorithm>
#include <iterator>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"
#include "loaders/tokenizer_impl.h"
#include "loaders/unicode.h"

namespace pinfer {
namespace {

absl::Status CheckId(const char* what, int32_t id, size_t n) {
  if (id < -1 || id >= (int64_t)n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", what, " id ", id, " is outside the vocabulary of ", n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerSpec spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) return absl::InvalidArgumentError("tokenizer: empty vocabulary");
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", spec.scores.size(), " scores for ", n, " tokens"));
  }
  if (!spec.types.empty() && spec.types.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", spec.types.size(), " token types for ", n, " tokens"));
  }
  for (auto [what, id] : {std::pair{"bos", spec.bos_id}, std::pair{"eos", spec.eos_id},
                          std::pair{"unknown", spec.unk_id}, std::pair{"padding", spec.pad_id}}) {
    if (auto s = CheckId(what, id, n); !s.ok()) return s;
  }
  for (int32_t id : spec.eog_ids) {
    if (id < 0 || id >= (int64_t)n) return CheckId("end-of-generation", id < 0 ? -2 : id, n);
  }
  if (spec.kind == TokenizerSpec::Kind::kSentencePiece) {
    return tokenizer_internal::MakeSentencePiece(std::move(spec));
  }
  return tokenizer_internal::MakeBytePairGpt2(std::move(spec));
}

namespace {

// llama.cpp's texts of end-of-generation tokens (llama-vocab.cpp), end-of-turn markers first.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|eom_id|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "</s>",
    "<end_of_utterance>",
    "<eos>",
    "<｜end▁of▁sentence｜>",  // DeepSeek
};

}  // namespace

void AddEndOfGenerationId(TokenizerSpec* spec, int32_t id) {
  if (id < 0 || id == spec->eos_id) return;  // Tokenizer::Create checks the range
  if (std::find(spec->eog_ids.begin(), spec->eog_ids.end(), id) != spec->eog_ids.end()) return;
  spec->eog_ids.push_back(id);
}

void AddEndOfTurnTokens(TokenizerSpec* spec) {
  constexpr size_t kTexts = std::size(kEndOfTurnTexts);
  std::vector<int32_t> found(kTexts, -1);  // the first token of each text
  for (size_t id = 0; id < spec->tokens.size(); ++id) {
    const std::string& text = spec->tokens[id];
    if (text.size() < 4 || (text[0] != '<' && text[0] != '_' && text[0] != '[')) continue;
    for (size_t i = 0; i < kTexts; ++i) {
      if (found[i] < 0 && text == kEndOfTurnTexts[i]) found[i] = static_cast<int32_t>(id);
    }
  }
  for (int32_t id : found) AddEndOfGenerationId(spec, id);
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  if (id < 0) return false;
  if (id == spec_.eos_id) return true;
  return std::find(spec_.eog_ids.begin(), spec_.eog_ids.end(), id) != spec_.eog_ids.end();
}

bool Tokenizer::IsControl(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return false;
  if (!spec_.types.empty()) return spec_.types[id] == TokenType::kControl;
  return id == spec_.bos_id || id == spec_.eos_id;
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids) const {
  StreamDecoder dec(*this);
  std::string out;
  for (int32_t id : ids) out += dec.Push(id);
  out += dec.Flush();
  return out;
}

// ---------------------------------------------------------------------------------------------
// StreamDecoder

namespace {

// Moves the complete characters at the front of *pending into *out. Bytes that can never
// form a character become U+FFFD; an incomplete but so far valid tail stays held, unless
// flush is set.
void DrainUtf8(std::string* pending, std::string* out, bool flush) {
  const std::string& p = *pending;
  size_t i = 0;
  while (i < p.size()) {
    size_t len = 0;
    if (ValidUtf8At(p, i, &len)) {
      out->append(p, i, len);
      i += len;
      continue;
    }
    const int need = Utf8SequenceLength(static_cast<uint8_t>(p[i]));
    if (need > 1 && i + need > p.size()) {
      // A truncated character: hold it if every byte so far could still be part of it.
      bool prefix_ok = true;
      for (size_t j = i + 1; j < p.size(); ++j) {
        if ((static_cast<uint8_t>(p[j]) & 0xC0) != 0x80) prefix_ok = false;
      }
      if (prefix_ok && !flush) break;
      if (prefix_ok) {
        AppendUtf8(kReplacementChar, out);
        i = p.size();
        break;
      }
    }
    AppendUtf8(kReplacementChar, out);
    ++i;
  }
  pending->erase(0, i);
}

}  // namespace

std::string StreamDecoder::Push(int32_t id) {
  const int32_t prev = prev_;
  prev_ = id;
  if (id < 0 || id >= tok_.n_vocab() || tok_.IsControl(id)) return "";
  std::string piece = tok_.TokenBytes(id);
  const TokenizerSpec& spec = tok_.spec();
  if (spec.kind == TokenizerSpec::Kind::kSentencePiece && spec.add_space_prefix &&
      (prev < 0 || prev == tok_.bos()) && !piece.empty() && piece[0] == ' ') {
    piece.erase(0, 1);
  }
  pending_ += piece;
  std::string out;
  DrainUtf8(&pending_, &out, /*flush=*/false);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out;
  DrainUtf8(&pending_, &out, /*flush=*/true);
  return out;
}

// ---------------------------------------------------------------------------------------------
// TokenizerBase

namespace tokenizer_internal {

std::vector<Symbol> CharSymbols(std::string_view word, const PieceMap& pieces) {
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  size_t pos = 0;
  while (pos < word.size()) {
    size_t len = 0;
    if (!ValidUtf8At(word, pos, &len)) len = 1;
    Symbol s;
    s.start = (uint32_t)pos;
    s.len = (uint32_t)len;
    s.prev = (int32_t)syms.size() - 1;
    s.next = (int32_t)syms.size() + 1;
    auto it = pieces.find(word.substr(pos, len));
    s.id = it == pieces.end() ? -1 : it->second;
    syms.push_back(s);
    pos += len;
  }
  if (!syms.empty()) syms.back().next = -1;
  return syms;
}

TokenizerBase::TokenizerBase(TokenizerSpec spec) : Tokenizer(std::move(spec)) {}

std::string TokenizerBase::TokenBytes(int32_t id) const {
  if (id < 0 || id >= (int32_t)bytes_.size()) return "";
  return bytes_[id];
}

absl::Status TokenizerBase::InitCommon() {
  const int32_t n = n_vocab();
  bytes_.resize(n);
  pieces_.reserve(n);
  std::vector<int32_t> specials;
  for (int32_t id = 0; id < n; ++id) {
    bytes_[id] = PieceBytes(id);
    const TokenType t = type(id);
    const std::string& text = spec_.tokens[id];
    if (t == TokenType::kNormal || t == TokenType::kUserDefined || t == TokenType::kUndefined) {
      pieces_.emplace(text, id);  // first id wins for duplicate pieces
    }
    if ((t == TokenType::kControl || t == TokenType::kUserDefined) && !text.empty()) {
      specials.push_back(id);
    }
  }
  std::stable_sort(specials.begin(), specials.end(), [&](int32_t a, int32_t b) {
    return spec_.tokens[a].size() > spec_.tokens[b].size();
  });
  for (int32_t id : specials) {
    specials_by_first_byte_[static_cast<uint8_t>(spec_.tokens[id][0])].push_back(id);
  }
  return absl::OkStatus();
}

std::vector<Fragment> TokenizerBase::SplitSpecial(std::string_view text, bool parse_special) const {
  std::vector<Fragment> out;
  size_t start = 0, pos = 0;
  while (pos < text.size()) {
    int32_t found = -1;
    for (int32_t id : specials_by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      if (!parse_special && type(id) == TokenType::kControl) continue;
      const std::string& s = spec_.tokens[id];
      if (text.compare(pos, s.size(), s) == 0) {
        found = id;
        break;
      }
    }
    if (found < 0) {
      ++pos;
      continue;
    }
    if (pos > start) out.push_back({-1, text.substr(start, pos - start)});
    out.push_back({found, {}});
    pos += spec_.tokens[found].size();
    start = pos;
  }
  if (pos > start) out.push_back({-1, text.substr(start, pos - start)});
  return out;
}

absl::Status TokenizerBase::BuildMergeRanks() {
  merge_ranks_.reserve(spec_.merges.size());
  for (size_t rank = 0; rank < spec_.merges.size(); ++rank) {
    const std::string& m = spec_.merges[rank];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= m.size()) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: merge ", rank, " (\"", m,
                                                     "\") is not two pieces separated by a space"));
    }
    const std::string_view a(m.data(), sp), b(m.data() + sp + 1, m.size() - sp - 1);
    auto ia = pieces_.find(a), ib = pieces_.find(b);
    auto im = pieces_.find(std::string(a) + std::string(b));
    if (ia == pieces_.end() || ib == pieces_.end() || im == pieces_.end()) continue;
    const uint64_t key = ((uint64_t)(uint32_t)ia->second << 32) | (uint32_t)ib->second;
    merge_ranks_.emplace(key, std::pair<int32_t, int32_t>((int32_t)rank, im->second));
  }
  return absl::OkStatus();
}

bool TokenizerBase::MergeRank(int32_t a, int32_t b, float* priority, int32_t* id) const {
  if (a < 0 || b < 0) return false;
  auto it = merge_ranks_.find(((uint64_t)(uint32_t)a << 32) | (uint32_t)b);
  if (it == merge_ranks_.end()) return false;
  *priority = -(float)it->second.first;
  *id = it->second.second;
  return true;
}

}  // namespace tokenizer_internal
}  // namespace pinfer
