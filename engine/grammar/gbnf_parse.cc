// GBNF text -> GbnfRule list. A recursive-descent parser whose only recursion is nested
// groups, bounded by kMaxGroupDepth.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/grammar/escapes.h"
#include "engine/grammar/gbnf_ast.h"
#include "engine/grammar/utf8.h"

namespace pinfer::grammar {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  absl::StatusOr<std::vector<GbnfRule>> Run() {
    std::vector<GbnfRule> rules;
    std::set<std::string> seen;
    SkipSpace(true);
    while (!AtEnd()) {
      GbnfRule rule;
      rule.line = line_;
      rule.name = ParseName();
      if (rule.name.empty()) return Error("expected a rule name");
      SkipSpace(false);
      if (s_.substr(pos_, 3) != "::=") return Error("expected '::=' after rule name");
      pos_ += 3;
      auto alts = ParseAlternatives(0);
      if (!alts.ok()) return alts.status();
      rule.alternatives = std::move(*alts);
      if (!seen.insert(rule.name).second) {
        return absl::InvalidArgumentError(
            absl::StrFormat("grammar line %d: rule '%s' is defined twice", rule.line, rule.name));
      }
      rules.push_back(std::move(rule));
      SkipSpace(true);
    }
    if (rules.empty()) return absl::InvalidArgumentError("grammar: no rules");
    return rules;
  }

 private:
  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }

  absl::Status Error(std::string_view what) {
    size_t line_start = s_.rfind('\n', pos_ == 0 ? 0 : pos_ - 1);
    size_t col = line_start == std::string_view::npos ? pos_ + 1 : pos_ - line_start;
    if (pos_ == 0) col = 1;
    return absl::InvalidArgumentError(
        absl::StrFormat("grammar line %d, column %d: %s", line_, col, what));
  }

  // Spaces, tabs, comments; newlines too when newline_ok.
  void SkipSpace(bool newline_ok) {
    while (!AtEnd()) {
      char c = Peek();
      if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else if (c == '\n' && newline_ok) {
        ++pos_;
        ++line_;
      } else {
        break;
      }
    }
  }

  std::string ParseName() {
    size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  absl::StatusOr<GbnfAlternatives> ParseAlternatives(int depth) {
    if (depth > kMaxGroupDepth) {
      return Error(absl::StrCat("groups nested deeper than ", kMaxGroupDepth));
    }
    GbnfAlternatives alts;
    while (true) {
      auto seq = ParseSequence(depth);
      if (!seq.ok()) return seq.status();
      alts.push_back(std::move(*seq));
      // An alternative may continue on the next line when that line starts with '|'.
      size_t save = pos_;
      int save_line = line_;
      SkipSpace(true);
      if (Peek() == '|') {
        ++pos_;
        continue;
      }
      pos_ = save;
      line_ = save_line;
      return alts;
    }
  }

  absl::StatusOr<GbnfSequence> ParseSequence(int depth) {
    GbnfSequence seq;
    while (true) {
      SkipSpace(depth > 0);
      if (AtEnd()) return seq;
      char c = Peek();
      if (c == '|' || c == ')' || c == '\n') return seq;
      // A new rule ("name ::=") starts: the sequence ended (only at depth 0 after a newline,
      // which SkipSpace(false) stops at, so this is reached within a group only).
      GbnfItem item;
      if (c == '"') {
        ++pos_;
        auto lit = ParseQuoted('"');
        if (!lit.ok()) return lit.status();
        item.kind = GbnfItem::Kind::kLiteral;
        item.literal = std::move(*lit);
      } else if (c == '[') {
        ++pos_;
        absl::Status st = ParseClass(&item);
        if (!st.ok()) return st;
      } else if (c == '.') {
        ++pos_;
        item.kind = GbnfItem::Kind::kClass;
        item.negated = true;  // [^] : any code point
      } else if (c == '(') {
        ++pos_;
        auto inner = ParseAlternatives(depth + 1);
        if (!inner.ok()) return inner.status();
        SkipSpace(true);
        if (Peek() != ')') return Error("expected ')' to close the group");
        ++pos_;
        item.kind = GbnfItem::Kind::kGroup;
        item.group = std::make_shared<GbnfAlternatives>(std::move(*inner));
      } else if (IsNameChar(c)) {
        size_t save = pos_;
        item.kind = GbnfItem::Kind::kRef;
        item.name = ParseName();
        size_t after = pos_;
        SkipSpace(false);
        if (s_.substr(pos_, 3) == "::=") {
          if (depth > 0) return Error("rule definition inside a group");
          pos_ = save;
          return seq;  // the next rule (same line as this one ends: tolerated)
        }
        pos_ = after;
      } else {
        return Error(absl::StrFormat("unexpected character '%c'", c));
      }
      absl::Status st = ParseRepetition(&item);
      if (!st.ok()) return st;
      seq.push_back(std::move(item));
    }
  }

  absl::Status ParseRepetition(GbnfItem* item) {
    char c = Peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      item->min = c == '+' ? 1 : 0;
      item->max = c == '?' ? 1 : -1;
      return absl::OkStatus();
    }
    if (c != '{') return absl::OkStatus();
    ++pos_;
    SkipSpace(false);
    auto m = ParseInt();
    if (!m.ok()) return m.status();
    int n = *m;
    SkipSpace(false);
    if (Peek() == ',') {
      ++pos_;
      SkipSpace(false);
      if (Peek() == '}') {
        n = -1;
      } else {
        auto v = ParseInt();
        if (!v.ok()) return v.status();
        n = *v;
      }
      SkipSpace(false);
    }
    if (Peek() != '}') return Error("expected '}' to close the repetition");
    ++pos_;
    if (n != -1 && n < *m) return Error("repetition {m,n} with n < m");
    item->min = *m;
    item->max = n;
    return absl::OkStatus();
  }

  absl::StatusOr<int> ParseInt() {
    if (!(Peek() >= '0' && Peek() <= '9')) return Error("expected a number in {m,n}");
    long v = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      ++pos_;
      if (v > kMaxRepetition) {
        return Error(absl::StrCat("repetition count above the limit of ", kMaxRepetition));
      }
    }
    return static_cast<int>(v);
  }

  // One code point of a literal or class, escapes resolved.
  absl::StatusOr<char32_t> ParseChar() {
    if (AtEnd()) return Error("unterminated literal or class");
    if (Peek() == '\\') {
      ++pos_;
      char e = Peek();
      ++pos_;
      if (std::optional<char32_t> c = ControlEscape(e)) return *c;
      if (int digits = HexEscapeDigits(e)) return ParseHex(digits);
      switch (e) {
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
          return static_cast<char32_t>(e);
        default:
          --pos_;
          return Error(absl::StrFormat("unknown escape '\\%c'", e));
      }
    }
    char32_t cp;
    size_t len = DecodeUtf8(s_.substr(pos_), &cp);
    if (len == 0) return Error("invalid UTF-8 in the grammar text");
    if (cp == '\n') ++line_;
    pos_ += len;
    return cp;
  }

  absl::StatusOr<char32_t> ParseHex(int digits) {
    std::optional<char32_t> v = HexEscapeValue(s_.substr(pos_), digits);
    if (!v) {
      return Error(
          absl::StrFormat("expected %d hex digits of a code point up to U+10FFFF", digits));
    }
    pos_ += static_cast<size_t>(digits);
    return *v;
  }

  absl::StatusOr<std::u32string> ParseQuoted(char quote) {
    std::u32string out;
    while (true) {
      if (AtEnd() || Peek() == '\n') return Error("unterminated string literal");
      if (Peek() == quote) {
        ++pos_;
        return out;
      }
      auto c = ParseChar();
      if (!c.ok()) return c.status();
      out.push_back(*c);
    }
  }

  absl::Status ParseClass(GbnfItem* item) {
    item->kind = GbnfItem::Kind::kClass;
    if (Peek() == '^') {
      item->negated = true;
      ++pos_;
    }
    while (true) {
      if (AtEnd() || Peek() == '\n') return Error("unterminated character class");
      if (Peek() == ']') {
        ++pos_;
        return absl::OkStatus();
      }
      auto lo = ParseChar();
      if (!lo.ok()) return lo.status();
      char32_t hi = *lo;
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != '\0') {
        ++pos_;
        auto h = ParseChar();
        if (!h.ok()) return h.status();
        hi = *h;
        if (hi < *lo) return Error("character range with its end before its start");
      }
      item->ranges.push_back({*lo, hi});
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
  int line_ = 1;
};

}  // namespace

absl::StatusOr<std::vector<GbnfRule>> ParseGbnf(std::string_view text) {
  if (text.size() > kMaxGrammarBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar of ", text.size(), " bytes is over the limit of ", kMaxGrammarBytes));
  }
  return Parser(text).Run();
}

}  // namespace pinfer::grammar
