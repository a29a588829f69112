// Regex -> GBNF by recursive descent: each alternation becomes a parenthesised GBNF group,
// each atom a literal, a class or a group, each quantifier GBNF's own.
#include "engine/grammar/regex.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/grammar/escapes.h"
#include "engine/grammar/gbnf_ast.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/utf8.h"

namespace pinfer::grammar {
namespace {

using Ranges = std::vector<std::pair<char32_t, char32_t>>;

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};  // \t \n \v \f \r and space

// A code point as a GBNF class member.
std::string ClassChar(char32_t c) {
  const bool plain = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  if (plain) return std::string(1, static_cast<char>(c));
  if (c <= 0xFFFF) return absl::StrFormat("\\u%04X", static_cast<uint32_t>(c));
  return absl::StrFormat("\\U%08X", static_cast<uint32_t>(c));
}

std::string ClassText(const Ranges& ranges, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (const auto& [lo, hi] : ranges) {
    out += ClassChar(lo);
    if (hi != lo) absl::StrAppend(&out, "-", ClassChar(hi));
  }
  return out + "]";
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view p) : p_(p) {}

  absl::StatusOr<std::string> Run() {
    if (Peek() == '^') ++pos_;
    auto body = Alternation(0);
    if (!body.ok()) return body.status();
    if (pos_ < p_.size()) return Error(p_[pos_] == ')' ? "unbalanced ')'" : "unexpected text");
    return absl::StrCat("root ::= ", *body, "\n");
  }

 private:
  char Peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }
  bool AtEnd() const { return pos_ >= p_.size(); }
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("guided_regex: ", what, " at offset ", pos_));
  }
  absl::Status Unsupported(const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("guided_regex: ", what, " at offset ", pos_, " is not supported"));
  }

  absl::StatusOr<std::string> Alternation(int depth) {
    if (depth > kMaxGroupDepth) return Unsupported(absl::StrCat("nesting over ", kMaxGroupDepth));
    std::string out = "(";
    while (true) {
      auto seq = Sequence(depth);
      if (!seq.ok()) return seq.status();
      absl::StrAppend(&out, " ", *seq);
      if (Peek() != '|') break;
      ++pos_;
      out += " |";
    }
    return out + " )";
  }

  absl::StatusOr<std::string> Sequence(int depth) {
    std::string out;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$') {
        if (pos_ + 1 != p_.size()) return Unsupported("'$' before the end of the pattern");
        ++pos_;
        break;
      }
      auto atom = Atom(depth);
      if (!atom.ok()) return atom.status();
      auto quant = Quantifier();
      if (!quant.ok()) return quant.status();
      absl::StrAppend(&out, out.empty() ? "" : " ", *atom, *quant);
    }
    return out.empty() ? std::string("\"\"") : out;
  }

  // "" or GBNF's suffix for a quantifier; a '{' that is no quantifier stays for Atom.
  absl::StatusOr<std::string> Quantifier() {
    std::string q;
    const char c = Peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      q = std::string(1, c);
    } else if (c == '{') {
      auto braces = Braces();
      if (!braces.ok()) return braces.status();
      if (braces->empty()) return q;
      q = *braces;
    } else {
      return q;
    }
    if (Peek() == '?') ++pos_;  // lazy: the same strings
    if (Peek() == '+') return Unsupported("a possessive quantifier");
    if (Peek() == '*' || Peek() == '+' || Peek() == '?') {
      return Error("a quantifier after a quantifier");
    }
    return q;
  }

  // {m} {m,} {m,n} {,n} as GBNF text; "" (nothing consumed) when the braces are no quantifier.
  absl::StatusOr<std::string> Braces() {
    size_t i = pos_ + 1;
    auto number = [&](long* v) {
      const size_t from = i;
      *v = 0;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9' && *v <= kMaxRepetition) {
        *v = *v * 10 + (p_[i++] - '0');
      }
      return i > from;
    };
    long m = 0, n = 0;
    const bool has_m = number(&m);
    bool has_n = false, comma = false;
    if (i < p_.size() && p_[i] == ',') {
      comma = true;
      ++i;
      has_n = number(&n);
    }
    if (i >= p_.size() || p_[i] != '}' || (!has_m && !has_n)) return std::string();
    if (m > kMaxRepetition || n > kMaxRepetition) {
      return Unsupported(absl::StrCat("a count over ", kMaxRepetition));
    }
    if (has_n && n < m) return Error("a quantifier {m,n} with n < m");
    pos_ = i + 1;
    if (!comma) return absl::StrCat("{", m, "}");
    return has_n ? absl::StrCat("{", m, ",", n, "}") : absl::StrCat("{", m, ",}");
  }

  absl::StatusOr<std::string> Atom(int depth) {
    const char c = Peek();
    if (c == '(') return Group(depth);
    if (c == '[') return Class();
    if (c == '.') {
      ++pos_;
      return std::string("[^\\n]");
    }
    if (c == '^') return Unsupported("'^' after the start of the pattern");
    if (c == '*' || c == '+' || c == '?') return Error("a quantifier with nothing to repeat");
    if (c == '{') {  // a literal '{' unless it starts a quantifier
      auto braces = Braces();
      if (!braces.ok()) return braces.status();
      if (!braces->empty()) return Error("a quantifier with nothing to repeat");
    }
    if (c == '\\') {
      Ranges ranges;
      bool negated = false;
      auto cp = Escape(/*in_class=*/false, &ranges, &negated);
      if (!cp.ok()) return cp.status();
      if (!ranges.empty()) return ClassText(ranges, negated);
      return Literal(*cp);
    }
    char32_t cp;
    const size_t len = DecodeUtf8(p_.substr(pos_), &cp);
    if (len == 0) return Error("invalid UTF-8");
    pos_ += len;
    return Literal(cp);
  }

  static std::string Literal(char32_t cp) {
    std::string s;
    AppendUtf8(cp, &s);
    return GbnfQuote(s);
  }

  absl::StatusOr<std::string> Group(int depth) {
    ++pos_;  // '('
    if (Peek() == '?') {
      const std::string_view rest = p_.substr(pos_);
      if (rest.substr(0, 2) == "?:") {
        pos_ += 2;
      } else if (rest.substr(0, 3) == "?P<" ||
                 (rest.substr(0, 2) == "?<" && Peek(2) != '=' && Peek(2) != '!')) {
        const size_t close = p_.find('>', pos_);
        if (close == std::string_view::npos) return Error("an unterminated group name");
        pos_ = close + 1;
      } else if (rest.substr(0, 2) == "?=" || rest.substr(0, 2) == "?!" ||
                 rest.substr(0, 3) == "?<=" || rest.substr(0, 3) == "?<!") {
        return Unsupported("lookaround");
      } else if (rest.substr(0, 3) == "?P=") {
        return Unsupported("a backreference");
      } else {
        return Unsupported("an inline flag or extension group '(?'");
      }
    }
    auto inner = Alternation(depth + 1);
    if (!inner.ok()) return inner.status();
    if (Peek() != ')') return Error("a group without its ')'");
    ++pos_;
    return *inner;
  }

  absl::StatusOr<std::string> Class() {
    ++pos_;  // '['
    const bool negated = Peek() == '^';
    if (negated) ++pos_;
    Ranges ranges;
    bool first = true;
    while (true) {
      if (AtEnd()) return Error("a class without its ']'");
      if (Peek() == ']' && !first) break;
      first = false;
      auto lo = ClassMember(&ranges);
      if (!lo.ok()) return lo.status();
      if (*lo < 0) continue;  // a shorthand (\d, \w, \s) was added
      char32_t hi = static_cast<char32_t>(*lo);
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != '\0') {
        ++pos_;
        auto h = ClassMember(&ranges);
        if (!h.ok()) return h.status();
        if (*h < 0) return Error("a range ending in a shorthand class");
        if (*h < *lo) return Error("a range out of order");
        hi = static_cast<char32_t>(*h);
      }
      ranges.push_back({static_cast<char32_t>(*lo), hi});
    }
    ++pos_;  // ']'
    return ClassText(ranges, negated);
  }

  // One member: its code point, or -1 after adding a shorthand's ranges to *ranges.
  absl::StatusOr<int64_t> ClassMember(Ranges* ranges) {
    if (Peek() == '\\') {
      Ranges shorthand;
      bool negated = false;
      auto cp = Escape(/*in_class=*/true, &shorthand, &negated);
      if (!cp.ok()) return cp.status();
      if (shorthand.empty()) return static_cast<int64_t>(*cp);
      ranges->insert(ranges->end(), shorthand.begin(), shorthand.end());
      return -1;
    }
    char32_t cp;
    const size_t len = DecodeUtf8(p_.substr(pos_), &cp);
    if (len == 0) return Error("invalid UTF-8");
    pos_ += len;
    return static_cast<int64_t>(cp);
  }

  // After '\': a code point, or a shorthand class in *ranges (negated: \D \W \S).
  absl::StatusOr<char32_t> Escape(bool in_class, Ranges* ranges, bool* negated) {
    ++pos_;
    if (AtEnd()) return Error("a pattern ending in '\\'");
    const char e = Peek();
    ++pos_;
    if (std::string_view("dDwWsS").find(e) != std::string_view::npos) {
      *negated = e == 'D' || e == 'W' || e == 'S';
      if (*negated && in_class) {
        --pos_;
        return Unsupported(absl::StrCat("\\", std::string(1, e), " inside a class"));
      }
      const char lower = static_cast<char>(e | 0x20);
      *ranges = lower == 'd' ? kDigit : lower == 'w' ? kWord : kSpace;
      return U'\0';
    }
    if (std::optional<char32_t> c = ControlEscape(e)) return *c;
    if (int digits = HexEscapeDigits(e)) return Hex(digits);
    switch (e) {
      case 'b':
      case 'B':
      case 'A':
      case 'Z':
      case 'z':
      case 'G':
        --pos_;
        return Unsupported(absl::StrCat("the anchor \\", std::string(1, e)));
      case 'p':
      case 'P':
        --pos_;
        return Unsupported("a Unicode property class");
      default:
        break;
    }
    if (e >= '1' && e <= '9') {
      --pos_;
      return Unsupported("a backreference");
    }
    const bool alnum = (e >= '0' && e <= '9') || (e >= 'A' && e <= 'Z') || (e >= 'a' && e <= 'z');
    if (alnum || static_cast<unsigned char>(e) >= 0x80) {
      --pos_;
      return Error(absl::StrCat("an unknown escape \\", std::string(1, e)));
    }
    return static_cast<char32_t>(e);
  }

  absl::StatusOr<char32_t> Hex(int digits) {
    std::optional<char32_t> v = HexEscapeValue(p_.substr(pos_), digits);
    if (!v || (*v >= 0xD800 && *v <= 0xDFFF)) {
      return Error(absl::StrCat("an escape that needs ", digits, " hex digits of a character"));
    }
    pos_ += static_cast<size_t>(digits);
    return *v;
  }

  std::string_view p_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern) {
  return RegexParser(pattern).Run();
}

}  // namespace pinfer::grammar
