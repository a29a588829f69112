// Checks on a lowered grammar that the matcher relies on to terminate.
#pragma once

#include "absl/status/status.h"
#include "engine/grammar/grammar.h"

namespace pinfer::grammar {

// InvalidArgument naming the rules of a cycle when a rule can reach itself before consuming
// a byte (left recursion, also through rules that can match the empty string, such as
// `x*` of an `x` that can be empty). The matcher's expansion would never end on those.
absl::Status CheckNoLeftRecursion(const Grammar& g);

}  // namespace pinfer::grammar
