// Splits a template into text and tags, applying Jinja's whitespace control as Hugging Face
// configures it for chat templates (trim_blocks and lstrip_blocks on, the template's final
// newline dropped, "-" on a tag strips whitespace on that side, "+" keeps lstrip_blocks off),
// and tokenizes each tag's contents.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pinfer::jinja {

struct Token {
  enum class Type { kName, kString, kInt, kFloat, kOp, kEnd };
  Type type = Type::kEnd;
  std::string text;  // name, operator, or the string's decoded value
  int64_t int_value = 0;
  double float_value = 0;
  int line = 0;
};

struct Segment {
  enum class Kind { kText, kOutput, kStatement };  // text, {{ ... }}, {% ... %}
  Kind kind = Kind::kText;
  std::string text;           // kText
  std::vector<Token> tokens;  // kOutput, kStatement: ends with a kEnd token
  int line = 0;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

inline constexpr size_t kMaxTemplateBytes = 1 << 20;

// InvalidArgument naming the line for an unterminated tag, comment or string, or a character
// no token starts with.
absl::StatusOr<std::vector<Segment>> Lex(std::string_view source, const LexOptions& options = {});

}  // namespace pinfer::jinja
