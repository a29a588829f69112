#include "tests/testing/grammar_testing.h"

#include <string>
#include <vector>

#include "engine/grammar/grammar_matcher.h"
#include "gtest/gtest.h"

namespace pinfer::testing {

std::shared_ptr<const grammar::TokenVocabulary> ByteVocabulary() {
  static const std::shared_ptr<const grammar::TokenVocabulary> v = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    return std::make_shared<const grammar::TokenVocabulary>(std::move(bytes),
                                                            std::vector<int32_t>{});
  }();
  return v;
}

bool Accepts(const std::shared_ptr<const grammar::Grammar>& g, std::string_view text) {
  if (!g) return false;
  grammar::GrammarMatcher m(std::make_shared<grammar::GrammarAutomaton>(g, ByteVocabulary()));
  return m.AcceptBytes(text) && m.IsAccepting();
}

bool AcceptsGbnf(std::string_view gbnf, std::string_view text) {
  auto g = grammar::CompileGrammar(gbnf);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << gbnf;
  return g.ok() && Accepts(*g, text);
}

}  // namespace pinfer::testing
