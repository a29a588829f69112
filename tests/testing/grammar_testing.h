// Helpers for tests of grammars: a vocabulary of the 256 single bytes (so that any text can
// be fed byte by byte) and whether a grammar accepts exactly a text.
#pragma once

#include <memory>
#include <string_view>

#include "engine/grammar/grammar.h"
#include "engine/grammar/token_vocab.h"

namespace pinfer::testing {

std::shared_ptr<const grammar::TokenVocabulary> ByteVocabulary();

// The grammar accepts exactly `text` (false, with a test failure, when gbnf does not compile).
bool Accepts(const std::shared_ptr<const grammar::Grammar>& g, std::string_view text);
bool AcceptsGbnf(std::string_view gbnf, std::string_view text);

}  // namespace pinfer::testing
