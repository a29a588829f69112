#include "server/chat_prompt.h"

#include <algorithm>
#include <string>

namespace pinfer::server {

ChatPromptEncoder::ChatPromptEncoder(const Tokenizer& tok) : tok_(tok) {
  const TokenizerSpec& spec = tok.spec();
  std::vector<int32_t> specials;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const TokenType t = spec.types.empty() ? TokenType::kNormal : spec.types[id];
    if ((t == TokenType::kControl || t == TokenType::kUserDefined) && !spec.tokens[id].empty()) {
      specials.push_back(id);
    }
  }
  std::stable_sort(specials.begin(), specials.end(), [&](int32_t a, int32_t b) {
    return spec.tokens[a].size() > spec.tokens[b].size();
  });
  for (int32_t id : specials) {
    by_first_byte_[static_cast<uint8_t>(spec.tokens[id][0])].push_back(id);
  }
}

int32_t ChatPromptEncoder::SpecialAt(const std::string& text, size_t pos, size_t end) const {
  for (int32_t id : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
    const std::string& s = tok_.spec().tokens[id];
    if (pos + s.size() <= end && text.compare(pos, s.size(), s) == 0) return id;
  }
  return -1;
}

std::vector<int32_t> ChatPromptEncoder::Encode(const std::vector<PromptPiece>& pieces,
                                               bool special_in_content) const {
  std::string text;
  for (const PromptPiece& p : pieces) text += p.text;
  if (special_in_content) return tok_.Encode(text, /*add_special=*/true, /*parse_special=*/true);

  const TokenizerSpec& spec = tok_.spec();
  std::vector<int32_t> out;
  if (spec.add_bos && spec.bos_id >= 0) out.push_back(spec.bos_id);
  // The text between two special tokens found in template pieces is encoded as plain text
  // (it may span template text and message text, as it does in a whole-string encoding).
  size_t plain_from = 0, at = 0;
  auto flush_plain = [&](size_t to) {
    if (to > plain_from) {
      const std::vector<int32_t> ids =
          tok_.Encode(std::string_view(text).substr(plain_from, to - plain_from),
                      /*add_special=*/false, /*parse_special=*/false);
      out.insert(out.end(), ids.begin(), ids.end());
    }
  };
  for (const PromptPiece& p : pieces) {
    const size_t end = at + p.text.size();
    for (size_t pos = at; p.from_template && pos < end;) {
      const int32_t id = SpecialAt(text, pos, end);
      if (id < 0) {
        ++pos;
        continue;
      }
      flush_plain(pos);
      out.push_back(id);
      pos += spec.tokens[id].size();
      plain_from = pos;
    }
    at = end;
  }
  flush_plain(text.size());
  if (spec.add_eos && spec.eos_id >= 0) out.push_back(spec.eos_id);
  return out;
}

}  // namespace pinfer::server
