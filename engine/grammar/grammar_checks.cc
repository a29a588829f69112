#include "engine/grammar/grammar_checks.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pinfer::grammar {
namespace {

std::vector<bool> NullableRules(const Grammar& g) {
  const size_t n = g.rule_alternatives.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (int32_t pos : g.rule_alternatives[r]) {
        bool all = true;
        for (int32_t p = pos; g.elements[p].kind != Element::Kind::kEnd; ++p) {
          const Element& e = g.elements[p];
          if (e.kind == Element::Kind::kBytes || !nullable[e.value]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// The user's name for a rule ("value" for a generated "value#3").
std::string UserName(const Grammar& g, int32_t r) {
  const std::string& name = g.rule_names[r];
  return name.substr(0, name.find('#'));
}

}  // namespace

absl::Status CheckNoLeftRecursion(const Grammar& g) {
  const size_t n = g.rule_alternatives.size();
  const std::vector<bool> nullable = NullableRules(g);
  // Edges r -> s: s can be the first thing r expands to.
  std::vector<std::vector<int32_t>> first(n);
  for (size_t r = 0; r < n; ++r) {
    for (int32_t pos : g.rule_alternatives[r]) {
      for (int32_t p = pos; g.elements[p].kind == Element::Kind::kRule; ++p) {
        first[r].push_back(g.elements[p].value);
        if (!nullable[g.elements[p].value]) break;
      }
    }
  }
  // Iterative depth-first search with colours; a grey target closes a cycle.
  std::vector<uint8_t> colour(n, 0);
  std::vector<std::pair<int32_t, size_t>> stack;
  for (size_t start = 0; start < n; ++start) {
    if (colour[start]) continue;
    stack.push_back({static_cast<int32_t>(start), 0});
    colour[start] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == first[r].size()) {
        colour[r] = 2;
        stack.pop_back();
        continue;
      }
      const int32_t s = first[r][i++];
      if (colour[s] == 1) {
        std::vector<std::string> cycle;
        auto it =
            std::find_if(stack.begin(), stack.end(), [&](const auto& f) { return f.first == s; });
        for (; it != stack.end(); ++it) {
          std::string u = UserName(g, it->first);
          if (cycle.empty() || cycle.back() != u) cycle.push_back(u);
        }
        cycle.push_back(UserName(g, s));
        return absl::InvalidArgumentError(absl::StrCat(
            "grammar is left-recursive (a rule reaches itself before matching any character, "
            "which the matcher cannot run): ",
            absl::StrJoin(cycle, " -> "),
            "; rewrite it with repetition, e.g. `list ::= item (\",\" item)*`, and make sure "
            "nothing repeated with * or + can match the empty string"));
      }
      if (colour[s] == 0) {
        colour[s] = 1;
        stack.push_back({s, 0});
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pinfer::grammar
