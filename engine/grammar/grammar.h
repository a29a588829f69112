// A compiled grammar: the GBNF text of README "Grammars" lowered to rules over bytes, the form
// the matcher (grammar_matcher.h) runs. Code point classes become alternatives of UTF-8
// byte-range sequences, so a token's bytes (partial characters included) advance the matcher
// one byte at a time. Immutable once built; shared by every matcher of a request.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pinfer::grammar {

// One position of a rule alternative.
struct Element {
  enum class Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = Kind::kEnd;
  int32_t value = 0;  // kBytes: index into byte_sets; kRule: rule id
};

struct Grammar {
  // Every alternative of every rule, each ending with a kEnd element; a position is an index.
  std::vector<Element> elements;
  std::vector<std::vector<int32_t>> rule_alternatives;  // rule id -> start positions
  std::vector<std::string> rule_names;                  // generated rules: "name#k"
  std::vector<std::bitset<256>> byte_sets;
  int32_t root = 0;
  // Bytes that no byte set tells apart share a class (transitions are cached per class).
  std::array<uint8_t, 256> byte_class{};
  int n_byte_classes = 0;
};

inline constexpr size_t kMaxGrammarElements = 1 << 21;  // after lowering and repetition

// Parses and compiles GBNF text whose start rule is `root`. InvalidArgument naming the problem:
// a syntax error (line and column), an undefined rule, a missing root, left recursion (the
// rules involved), or a grammar too large after expanding repetitions.
absl::StatusOr<std::shared_ptr<const Grammar>> CompileGrammar(std::string_view gbnf,
                                                              std::string_view root = "root");

}  // namespace pinfer::grammar
