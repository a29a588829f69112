// Jinja statements and expressions from lexed segments (server/jinja/lexer.h).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "server/jinja/ast.h"
#include "server/jinja/lexer.h"

namespace pinfer::jinja {

inline constexpr int kMaxExpressionDepth = 96;  // nested sub-expressions
inline constexpr int kMaxBlockDepth = 96;       // nested if/for/macro/set blocks

// The template's statements. InvalidArgument for a syntax error (its line named);
// Unimplemented for a construct outside the supported subset (named: "{% include %}",
// "filter 'wordwrap'"), so that the caller can fall back to a built-in template.
absl::StatusOr<Body> ParseTemplate(const std::vector<Segment>& segments);

// One expression from tokens[*pos]; *pos moves past it. allow_tuple: "a, b" is a tuple;
// no_condition: stop before "if" (a for loop's filter).
absl::StatusOr<ExprPtr> ParseExpression(const std::vector<Token>& tokens, size_t* pos,
                                        bool allow_tuple = false, bool no_condition = false);

}  // namespace pinfer::jinja
