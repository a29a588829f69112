#include "engine/grammar_vocab.h"

#include <string>
#include <vector>

namespace pinfer {

std::shared_ptr<const grammar::TokenVocabulary> MakeGrammarVocabulary(const Tokenizer& tok) {
  const TokenizerSpec& spec = tok.spec();
  std::vector<std::string> bytes(static_cast<size_t>(tok.n_vocab()));
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.IsEndOfGeneration(id)) eog.push_back(id);
    const TokenType type = spec.types.empty() ? TokenType::kNormal : spec.types[id];
    if (tok.IsControl(id) || type == TokenType::kUnknown || type == TokenType::kUnused) continue;
    bytes[id] = tok.TokenBytes(id);
  }
  return std::make_shared<const grammar::TokenVocabulary>(std::move(bytes), std::move(eog));
}

}  // namespace pinfer
