// The vocabulary of a tokenizer as grammars see it (engine/grammar/token_vocab.h): each
// token's bytes, the control, unknown and unused tokens never allowed (no bytes), and the
// end-of-generation ids (EOS and the tokenizer's other EOG ids) allowed where a grammar
// accepts. Built once per engine, on first use by a constrained request.
#pragma once

#include <memory>

#include "engine/grammar/token_vocab.h"
#include "loaders/tokenizer.h"

namespace pinfer {

std::shared_ptr<const grammar::TokenVocabulary> MakeGrammarVocabulary(const Tokenizer& tok);

}  // namespace pinfer
