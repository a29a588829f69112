// The parsed form of a GBNF grammar (see README "Grammars"): rules of alternatives of
// sequences of items, each item with a repetition count. Code points, not bytes: lowering to
// the byte-level form the matcher runs is grammar_compile.cc's job.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace pinfer::grammar {

struct GbnfItem;
using GbnfSequence = std::vector<GbnfItem>;
using GbnfAlternatives = std::vector<GbnfSequence>;

// Inclusive code point range.
using CodeRange = std::pair<char32_t, char32_t>;

struct GbnfItem {
  enum class Kind { kLiteral, kClass, kRef, kGroup };
  Kind kind = Kind::kLiteral;
  std::u32string literal;         // kLiteral: code points to match in order
  std::vector<CodeRange> ranges;  // kClass: the ranges listed ("." is [^] : every code point)
  bool negated = false;           // kClass: [^...]
  std::string name;               // kRef: rule name
  std::shared_ptr<GbnfAlternatives> group;  // kGroup: ( ... )
  int min = 1;                              // repetition: at least min ...
  int max = 1;                              // ... and at most max times; -1: unbounded
};

struct GbnfRule {
  std::string name;
  GbnfAlternatives alternatives;
  int line = 0;  // 1-based line of its definition, for messages
};

// Limits on what a grammar may ask for (bad input gets an error, not a stack overflow or an
// exhausted machine).
inline constexpr size_t kMaxGrammarBytes = 4 << 20;  // grammar text
inline constexpr int kMaxGroupDepth = 128;           // nested parentheses
inline constexpr int kMaxRepetition = 10000;         // m and n of {m,n}

// Parses GBNF text into rules in order of definition. InvalidArgument naming the line and
// column of the first problem (unknown syntax, unterminated literal or class, bad escape,
// a rule defined twice, a repetition out of range, nesting too deep).
absl::StatusOr<std::vector<GbnfRule>> ParseGbnf(std::string_view text);

}  // namespace pinfer::grammar
