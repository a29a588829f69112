// Regular expressions as grammars (guided_regex): for each pattern, the compiled grammar
// accepts exactly the strings std::regex_match accepts (an independent regex engine, on
// ASCII strings drawn at random from the pattern's alphabet and on hand-picked ones), code
// points rather than bytes, and every refused construct named.
#include "engine/grammar/regex.h"

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "engine/grammar/grammar.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/grammar_testing.h"

namespace pinfer::grammar {
namespace {

using ::testing::HasSubstr;

class Compiled {
 public:
  explicit Compiled(const std::string& pattern) {
    auto gbnf = RegexToGbnf(pattern);
    EXPECT_TRUE(gbnf.ok()) << pattern << ": " << gbnf.status();
    if (!gbnf.ok()) return;
    auto g = CompileGrammar(*gbnf);
    EXPECT_TRUE(g.ok()) << pattern << " -> " << *gbnf << ": " << g.status();
    if (g.ok()) grammar_ = *g;
  }
  bool Accepts(const std::string& text) const { return pinfer::testing::Accepts(grammar_, text); }

 private:
  std::shared_ptr<const Grammar> grammar_;
};

TEST(RegexToGbnf, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // pattern, alphabet of the random strings
      {R"(\d{3}-\d{4})", "0123456789-a"},
      {R"((ab|cd)*e?)", "abcde"},
      {R"([a-c]+x{2,3}[^a-c]?)", "abcxyz"},
      {R"((?:yes|no|maybe))", "yesnomaby"},
      {R"(\w+@\w+\.(com|org))", "ab@.comrg_1"},
      {R"(^-?(0|[1-9]\d{0,3})(\.\d{1,2})?$)", "0123.-9"},
      {R"([\d\s]{2,}|\.\*\+)", "12 .*+\t"},
      {R"(a{0,2}b{2}c{1,})", "abc"},
      {R"(\S\W\D)", "a1 !"},
      {R"(x(y(z|)|w)+)", "xyzw"},
  };
  std::mt19937 rng(7);
  for (const auto& [pattern, alphabet] : cases) {
    SCOPED_TRACE(pattern);
    const Compiled c(pattern);
    const std::regex ref(pattern, std::regex::ECMAScript);
    int matched = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const int len = static_cast<int>(rng() % 12);
      for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      const bool want = std::regex_match(s, ref);
      matched += want;
      ASSERT_EQ(c.Accepts(s), want) << "'" << s << "'";
    }
    // Hand-picked members, so that every pattern is checked on matches too.
    for (const char* s : {"555-1234", "ababcde", "axxx", "ayyx", "maybe", "a_1@b.org", "-12.5", "0",
                          "1 2", ".*+", "bbccc", "x !", "xyzwyw", "a{"}) {
      ASSERT_EQ(c.Accepts(s), std::regex_match(s, ref)) << "'" << s << "'";
    }
    std::printf("%-32s %d of 3000 random strings match\n", pattern.c_str(), matched);
  }
}

// Python's readings where ECMAScript differs: {,n} counts from 0; braces that start no
// quantifier are literal text.
TEST(RegexToGbnf, PythonBraces) {
  const Compiled upto("a{,2}");
  EXPECT_TRUE(upto.Accepts(""));
  EXPECT_TRUE(upto.Accepts("aa"));
  EXPECT_FALSE(upto.Accepts("aaa"));
  EXPECT_TRUE(Compiled("a{1}{").Accepts("a{"));
  EXPECT_TRUE(Compiled("x{a}").Accepts("x{a}"));
  EXPECT_FALSE(RegexToGbnf("a{1}{2}").ok());
}

TEST(RegexToGbnf, ClassesAndDotWorkOnCodePoints) {
  const Compiled c("[α-ω]{2}.é");
  EXPECT_TRUE(c.Accepts("αβ€é"));
  EXPECT_FALSE(c.Accepts("αβ\né"));
  EXPECT_FALSE(c.Accepts("ab€é"));
  EXPECT_TRUE(Compiled(R"(\u00e9\x41)").Accepts("éA"));
}

TEST(RegexToGbnf, RefusedConstructsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"((a)\1)", "backreference"},
      {R"(a(?=b))", "lookaround"},
      {R"((?i)abc)", "inline flag"},
      {R"(\bword)", "anchor \\b"},
      {R"(a^b)", "'^'"},
      {R"(a$b)", "'$'"},
      {R"(\p{L})", "Unicode property"},
      {R"(a*+)", "possessive"},
      {R"([\D])", "\\D inside a class"},
      {R"(a{20000})", "count over 10000"},
      {R"((ab)", "')'"},
      {R"(ab))", "unbalanced ')'"},
      {R"([ab)", "']'"},
      {R"(*a)", "nothing to repeat"},
  };
  for (const auto& [pattern, what] : cases) {
    auto g = RegexToGbnf(pattern);
    ASSERT_FALSE(g.ok()) << pattern << " -> " << *g;
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(what)) << pattern;
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("guided_regex")) << pattern;
  }
  std::string deep(200, '(');
  deep += "a" + std::string(200, ')');
  EXPECT_FALSE(RegexToGbnf(deep).ok());
}

}  // namespace
}  // namespace pinfer::grammar
