// Regular expressions (vLLM's guided_regex) as GBNF (compile with CompileGrammar): the
// sentences the grammar accepts are the strings the whole pattern matches (Python's
// re.fullmatch), over code points.
//
// Supported: literals (UTF-8), '.', classes ([a-z], [^...], escapes and \d \w \s inside),
// \d \D \w \W \s \S (ASCII meanings), escapes (\n \r \t \f \v \0 \xHH \uHHHH \UHHHHHHHH and
// any escaped punctuation), groups ( ), (?: ), (?P<name> ), (?<name> ), alternation |, the
// quantifiers * + ? {m} {m,} {m,n} {,n} (a lazy '?' after one changes nothing here), '^' at
// the very start and '$' at the very end. '{' that starts no quantifier is a literal, as in
// Python. '.' matches any character but a newline.
// Refused, InvalidArgument naming the construct and its offset: backreferences, lookaround,
// inline flags, anchors elsewhere (\b, \A, \Z, ^ or $ inside), Unicode properties,
// possessive quantifiers, \D \W \S inside a class, groups nested over 128 deep, counts over
// 10000.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pinfer::grammar {

// GBNF whose start rule is "root".
absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern);

}  // namespace pinfer::grammar
