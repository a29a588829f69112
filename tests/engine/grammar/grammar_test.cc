// GBNF parsing, compiling and matching: what a grammar accepts and rejects, its error
// messages, its limits (deep nesting is an error, not a stack overflow), and token masks
// against a brute-force check of every token.
#include "engine/grammar/grammar.h"

#include <random>
#include <string>
#include <vector>

#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/token_mask.h"
#include "engine/grammar/token_vocab.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pinfer::grammar {
namespace {

using ::testing::HasSubstr;

// 256 single-byte tokens, then `extra`, then an end token.
std::shared_ptr<TokenVocabulary> ByteVocab(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.insert(bytes.end(), extra.begin(), extra.end());
  bytes.push_back("");  // end token
  const int32_t eos = static_cast<int32_t>(bytes.size()) - 1;
  return std::make_shared<TokenVocabulary>(std::move(bytes), std::vector<int32_t>{eos});
}

GrammarMatcher Matcher(std::string_view gbnf, std::shared_ptr<TokenVocabulary> vocab = nullptr) {
  auto g = CompileGrammar(gbnf);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!vocab) vocab = ByteVocab();
  return GrammarMatcher(std::make_shared<GrammarAutomaton>(*g, vocab));
}

// Whether the grammar accepts exactly `text`.
bool Accepts(std::string_view gbnf, std::string_view text) {
  GrammarMatcher m = Matcher(gbnf);
  return m.AcceptBytes(text) && m.IsAccepting();
}

TEST(Grammar, LiteralsClassesAndRepetition) {
  const char* g = R"(root ::= "ab" [0-9]+ ("x" | "yz")? [^a-c]{2,3}  # comment
)";
  EXPECT_TRUE(Accepts(g, "ab1dd"));
  EXPECT_TRUE(Accepts(g, "ab123yzddd"));
  EXPECT_TRUE(Accepts(g, "ab0xzz"));
  EXPECT_FALSE(Accepts(g, "ab"));
  EXPECT_FALSE(Accepts(g, "ab1d"));
  EXPECT_FALSE(Accepts(g, "ab1dddd"));
  EXPECT_FALSE(Accepts(g, "ab1ad"));
  EXPECT_FALSE(Accepts(g, "ab1xyzdd"));
}

TEST(Grammar, RulesAlternativesOnNextLinesAndEscapes) {
  const char* g = R"(
root ::= greeting " " name
       | "\x41\u00e9\t" "\""
greeting ::= "hi" | "hello"
name ::= [a-z]{1,} "\\"
)";
  EXPECT_TRUE(Accepts(g, "hi bob\\"));
  EXPECT_TRUE(Accepts(g, "hello x\\"));
  EXPECT_TRUE(Accepts(g, "A\xc3\xa9\t\""));
  EXPECT_FALSE(Accepts(g, "hi bob"));
  EXPECT_FALSE(Accepts(g, "hey bob\\"));
}

TEST(Grammar, Utf8ClassesMatchWholeCharacters) {
  const char* g = R"(root ::= [α-ω]+ [^a] .)";
  EXPECT_TRUE(Accepts(g, "αβγ€x"));  // € (3 bytes) is not 'a'; '.' takes x
  EXPECT_TRUE(Accepts(g, "ω😀😀"));    // 4-byte characters
  EXPECT_FALSE(Accepts(g, "αa😀"));
  EXPECT_FALSE(Accepts(g, "A€x"));    // A is outside α-ω
  EXPECT_FALSE(Accepts(g, "α\xce"));  // half a character never accepts
  EXPECT_FALSE(Accepts(g,
                       "\xed\xa0\x80"
                       "ab"));  // a surrogate has no UTF-8 form
  // A token may end inside a character; the next one completes it.
  GrammarMatcher m = Matcher(g);
  EXPECT_TRUE(m.AcceptBytes("\xce"));
  EXPECT_FALSE(m.IsAccepting());
  EXPECT_TRUE(
      m.AcceptBytes("\xb1"
                    "b"));
  EXPECT_TRUE(m.AcceptBytes("c"));
  EXPECT_TRUE(m.IsAccepting());
}

TEST(Grammar, EmptyAlternativesAndNullableRules) {
  const char* g = "root ::= a b \"!\"\na ::= \"x\" | \nb ::= a a\n";
  EXPECT_TRUE(Accepts(g, "!"));
  EXPECT_TRUE(Accepts(g, "xxx!"));
  EXPECT_FALSE(Accepts(g, "xxxx!"));
}

TEST(Grammar, ErrorsNameWhatAndWhere) {
  auto e = CompileGrammar("root ::= \"abc");
  EXPECT_THAT(e.status().message(), HasSubstr("line 1"));
  EXPECT_THAT(e.status().message(), HasSubstr("unterminated"));
  e = CompileGrammar("root ::= foo\n");
  EXPECT_THAT(e.status().message(), HasSubstr("undefined rule 'foo'"));
  e = CompileGrammar("start ::= \"a\"\n");
  EXPECT_THAT(e.status().message(), HasSubstr("no rule 'root'"));
  e = CompileGrammar("root ::= \"a\"\nroot ::= \"b\"\n");
  EXPECT_THAT(e.status().message(), HasSubstr("defined twice"));
  e = CompileGrammar("root ::= [a-z]{3,2}");
  EXPECT_THAT(e.status().message(), HasSubstr("n < m"));
  e = CompileGrammar("root ::= [a-z]{99999}");
  EXPECT_THAT(e.status().message(), HasSubstr("limit"));
  e = CompileGrammar("root ::= \"\\q\"");
  EXPECT_THAT(e.status().message(), HasSubstr("unknown escape"));
  e = CompileGrammar("root ::= \"a\" @");
  EXPECT_THAT(e.status().message(), HasSubstr("column 14"));
  e = CompileGrammar("root ::= \"" + std::string(kMaxGrammarElements + 1, 'a') + "\"");
  EXPECT_THAT(e.status().message(), HasSubstr("too large"));
}

TEST(Grammar, LeftRecursionIsRefused) {
  auto e = CompileGrammar("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]\n");
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("left-recursive"));
  EXPECT_THAT(e.status().message(), HasSubstr("expr -> expr"));
  // Through a rule that can be empty, and by repeating something that can be empty.
  EXPECT_FALSE(CompileGrammar("root ::= e \"x\"\ne ::= o root\no ::= \"a\" | \n").ok());
  EXPECT_FALSE(CompileGrammar("root ::= (\"a\"?)*").ok());
  EXPECT_TRUE(CompileGrammar("root ::= \"(\" root \")\" | \"x\"").ok());
}

TEST(Grammar, DeepNestingIsAnErrorNotACrash) {
  std::string deep = "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
  auto e = CompileGrammar(deep);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("nested deeper"));
  std::string ok = "root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')');
  EXPECT_TRUE(CompileGrammar(ok).ok());
  // Input nested deeper than the matcher's stack bound is refused, not a stack overflow.
  GrammarMatcher m = Matcher("root ::= \"[\" root \"]\" | \"x\"");
  EXPECT_TRUE(m.AcceptBytes(std::string(kMaxStackDepth - 1, '[')));
  EXPECT_FALSE(m.AcceptBytes(std::string(10, '[')));
}

TEST(Grammar, RightRecursionKeepsTheStackFlat) {
  GrammarMatcher m = Matcher("root ::= [a-z] root | \"!\"");
  EXPECT_TRUE(m.AcceptBytes(std::string(100000, 'q')));
  EXPECT_TRUE(m.AcceptBytes("!"));
  EXPECT_TRUE(m.IsAccepting());
  EXPECT_LT(m.automaton().vocab().n_vocab(), 300);
}

TEST(Grammar, EndTokenOnlyWhereTheGrammarAccepts) {
  auto vocab = ByteVocab();
  const int32_t eos = vocab->n_vocab() - 1;
  GrammarMatcher m = Matcher("root ::= \"ab\" \"c\"?", vocab);
  EXPECT_FALSE(m.AcceptToken(eos));
  EXPECT_TRUE(m.AcceptToken('a'));
  EXPECT_TRUE(m.AcceptToken('b'));
  EXPECT_TRUE(m.IsAccepting());
  EXPECT_TRUE(m.CanContinue());
  GrammarMatcher fork = m;
  EXPECT_TRUE(fork.AcceptToken('c'));
  EXPECT_FALSE(fork.CanContinue());  // only the end token is left
  EXPECT_TRUE(m.AcceptToken(eos));
  EXPECT_TRUE(m.IsFinished());
  EXPECT_FALSE(m.AcceptToken('c'));
  EXPECT_FALSE(fork.IsFinished());
  std::vector<uint64_t> mask(fork.mask_words());
  fork.FillMask(mask);
  for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
    EXPECT_EQ((mask[id / 64] >> (id % 64)) & 1, id == eos ? 1u : 0u) << id;
  }
}

TEST(Grammar, ReplayRebuildsTheStateFromTokens) {
  auto vocab = ByteVocab({"ab", "abc", "{\"", "\": "});
  GrammarMatcher m = Matcher("root ::= \"{\\\"\" [a-z]+ \"\\\": \" [0-9]+", vocab);
  std::vector<int32_t> tokens = {258, 256, 'x', 259, '4', '2'};
  for (int32_t t : tokens) ASSERT_TRUE(m.AcceptToken(t)) << t;
  GrammarMatcher r = Matcher("root ::= \"{\\\"\" [a-z]+ \"\\\": \" [0-9]+", vocab);
  ASSERT_TRUE(r.Replay(tokens).ok());
  EXPECT_EQ(r.IsAccepting(), m.IsAccepting());
  tokens.push_back(257);  // "abc" after the number: refused, and said where
  auto st = r.Replay(tokens);
  EXPECT_THAT(st.message(), HasSubstr("position 6"));
}

// The mask equals trying every token on a copy of the matcher, along random walks through
// the JSON grammar with a vocabulary of multi-byte pieces (partial UTF-8 included).
TEST(Grammar, MaskMatchesBruteForce) {
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\",:0123456789.-+eE tfrulnasx\\\n\xc3\xa9\xe2\x82\xac";
  std::vector<std::string> extra;
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int len = 2 + rng() % 6;
    for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    extra.push_back(s);
  }
  extra.insert(extra.end(), {"true", "false", "null", "{\"", "\": ", "\"}", "\xe2\x82"});
  auto vocab = ByteVocab(extra);
  auto g = CompileGrammar(JsonObjectGbnf());
  ASSERT_TRUE(g.ok()) << g.status();
  auto automaton = std::make_shared<GrammarAutomaton>(*g, vocab);
  std::vector<uint64_t> mask(vocab->mask_words());
  for (int walk = 0; walk < 20; ++walk) {
    GrammarMatcher m(automaton);
    for (int step = 0; step < 40 && m.CanContinue(); ++step) {
      m.FillMask(mask);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
        GrammarMatcher copy = m;
        const bool ok = copy.AcceptToken(id);
        ASSERT_EQ(ok, ((mask[id / 64] >> (id % 64)) & 1) != 0)
            << "token " << id << " step " << step;
        if (ok && !vocab->is_eog(id)) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      ASSERT_TRUE(m.AcceptToken(allowed[rng() % allowed.size()]));
    }
  }
  const AutomatonStats stats = automaton->stats();
  EXPECT_GT(stats.mask_cache_hits, 0);
  EXPECT_FALSE(stats.overflowed);
}

TEST(Grammar, ApplyTokenMaskSetsExactlyTheRefusedLogits) {
  for (int32_t n : {1, 63, 64, 65, 200}) {
    std::vector<uint64_t> words((n + 63) / 64, 0);
    std::vector<float> logits(n, 1.f);
    for (int32_t i = 0; i < n; i += 3) words[i / 64] |= uint64_t{1} << (i % 64);
    if (n > 64) words[0] = ~uint64_t{0};  // a whole word allowed
    ApplyTokenMask(words, logits.data(), n);
    for (int32_t i = 0; i < n; ++i) {
      EXPECT_EQ(logits[i] == 1.f, MaskAllows(words, i)) << n << " " << i;
    }
  }
}

}  // namespace
}  // namespace pinfer::grammar
