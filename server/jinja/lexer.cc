#include "server/jinja/lexer.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace pinfer::jinja {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A tag or text before whitespace control.
struct Raw {
  enum class Kind { kText, kOutput, kStatement, kComment } kind;
  std::string text;
  std::vector<Token> tokens;
  bool strip_left = false, keep_left = false, strip_right = false;
  bool at_start = false;  // text starting at the template's first byte
  int line = 0;
};

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  absl::StatusOr<std::vector<Raw>> Run() {
    std::vector<Raw> out;
    while (pos_ < s_.size()) {
      const size_t open = NextOpen(pos_);
      if (open > pos_) {
        out.push_back({Raw::Kind::kText,
                       s_.substr(pos_, open - pos_),
                       {},
                       false,
                       false,
                       false,
                       pos_ == 0,
                       line_});
        Count(pos_, open);
      }
      pos_ = open;
      if (pos_ >= s_.size()) break;
      Raw tag;
      tag.line = line_;
      const char k = s_[pos_ + 1];
      pos_ += 2;
      if (pos_ < s_.size() && s_[pos_] == '-')
        tag.strip_left = true, ++pos_;
      else if (pos_ < s_.size() && s_[pos_] == '+')
        tag.keep_left = true, ++pos_;
      absl::Status st = k == '#' ? Comment(&tag) : Tag(k == '{' ? "}}" : "%}", &tag);
      if (!st.ok()) return st;
      tag.kind = k == '#'   ? Raw::Kind::kComment
                 : k == '{' ? Raw::Kind::kOutput
                            : Raw::Kind::kStatement;
      out.push_back(std::move(tag));
      if (out.back().kind == Raw::Kind::kStatement && IsRaw(out.back())) {
        st = RawBlock(&out);
        if (!st.ok()) return st;
      }
    }
    return out;
  }

 private:
  absl::Status Error(const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("template line ", line_, ": ", what));
  }
  void Count(size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) line_ += s_[i] == '\n';
  }
  size_t NextOpen(size_t from) const {
    for (size_t i = from; i + 1 < s_.size(); ++i) {
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    }
    return s_.size();
  }
  static bool IsRaw(const Raw& t) {
    return t.tokens.size() == 2 && t.tokens[0].type == Token::Type::kName &&
           t.tokens[0].text == "raw";
  }

  absl::Status Comment(Raw* tag) {
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) return Error("unterminated comment '{#'");
    tag->strip_right = end > pos_ && s_[end - 1] == '-';
    Count(pos_, end + 2);
    pos_ = end + 2;
    return absl::OkStatus();
  }

  // {% raw %} ... {% endraw %}: the text between is kept as it is.
  absl::Status RawBlock(std::vector<Raw>* out) {
    Raw open = std::move(out->back());
    out->pop_back();
    for (size_t i = pos_; (i = s_.find("{%", i)) != std::string::npos; ++i) {
      size_t j = i + 2;
      bool strip_left = j < s_.size() && s_[j] == '-';
      j += strip_left;
      while (j < s_.size() && IsSpace(s_[j])) ++j;
      if (s_.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      while (j < s_.size() && IsSpace(s_[j])) ++j;
      bool strip_right = j < s_.size() && s_[j] == '-';
      j += strip_right;
      if (s_.compare(j, 2, "%}") != 0) continue;
      open.kind = Raw::Kind::kComment;  // whitespace control as a tag, no output
      out->push_back(std::move(open));
      out->push_back(
          {Raw::Kind::kText, s_.substr(pos_, i - pos_), {}, false, false, false, false, line_});
      Raw close{Raw::Kind::kComment, "", {}, strip_left, false, strip_right, false, line_};
      Count(pos_, j + 2);
      pos_ = j + 2;
      out->push_back(std::move(close));
      return absl::OkStatus();
    }
    return Error("unterminated '{% raw %}'");
  }

  // Tokens up to `close`; like Jinja, a close inside open brackets ("{'a': {}}}") is not one.
  absl::Status Tag(std::string_view close, Raw* tag) {
    int open = 0;
    while (true) {
      while (pos_ < s_.size() && IsSpace(s_[pos_])) line_ += s_[pos_++] == '\n';
      if (pos_ >= s_.size())
        return Error(absl::StrCat("unterminated tag (expected '", std::string(close), "')"));
      if (open > 0) {
        absl::StatusOr<Token> t = Next();
        if (!t.ok()) return t.status();
        if (t->type == Token::Type::kOp && (t->text == "(" || t->text == "[" || t->text == "{"))
          ++open;
        if (t->type == Token::Type::kOp && (t->text == ")" || t->text == "]" || t->text == "}"))
          --open;
        tag->tokens.push_back(std::move(*t));
        continue;
      }
      if (s_[pos_] == '-' && s_.compare(pos_ + 1, 2, close) == 0) {
        tag->strip_right = true;
        pos_ += 3;
        break;
      }
      if (s_.compare(pos_, 2, close) == 0) {
        pos_ += 2;
        break;
      }
      absl::StatusOr<Token> t = Next();
      if (!t.ok()) return t.status();
      if (t->type == Token::Type::kOp && (t->text == "(" || t->text == "[" || t->text == "{"))
        ++open;
      tag->tokens.push_back(std::move(*t));
    }
    Token end;
    end.line = line_;
    tag->tokens.push_back(end);
    return absl::OkStatus();
  }

  absl::StatusOr<Token> Next() {
    Token t;
    t.line = line_;
    const char c = s_[pos_];
    if (IsNameStart(c)) {
      const size_t start = pos_;
      while (pos_ < s_.size() && (IsNameStart(s_[pos_]) || IsDigit(s_[pos_]))) ++pos_;
      t.type = Token::Type::kName;
      t.text = s_.substr(start, pos_ - start);
      return t;
    }
    if (IsDigit(c)) return Number();
    if (c == '\'' || c == '"') return String(c);
    static const char* kOps2[] = {"**", "//", "==", "!=", "<=", ">="};
    for (const char* op : kOps2) {
      if (s_.compare(pos_, 2, op) == 0) {
        pos_ += 2;
        t.type = Token::Type::kOp;
        t.text = op;
        return t;
      }
    }
    if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) != std::string_view::npos) {
      ++pos_;
      t.type = Token::Type::kOp;
      t.text = std::string(1, c);
      return t;
    }
    return Error(absl::StrCat("unexpected character '", std::string(1, c), "' in a tag"));
  }

  absl::StatusOr<Token> Number() {
    Token t;
    t.line = line_;
    const size_t start = pos_;
    while (pos_ < s_.size() && (IsDigit(s_[pos_]) || s_[pos_] == '_')) ++pos_;
    bool is_float = false;
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' && IsDigit(s_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      while (pos_ < s_.size() && IsDigit(s_[pos_])) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      size_t j = pos_ + 1;
      if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
      if (j < s_.size() && IsDigit(s_[j])) {
        is_float = true;
        pos_ = j;
        while (pos_ < s_.size() && IsDigit(s_[pos_])) ++pos_;
      }
    }
    std::string text;
    for (size_t i = start; i < pos_; ++i) {
      if (s_[i] != '_') text.push_back(s_[i]);
    }
    t.text = text;
    if (is_float) {
      t.type = Token::Type::kFloat;
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      t.type = Token::Type::kInt;
      if (text.size() > 18) return Error("integer literal too large");
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
    }
    return t;
  }

  absl::StatusOr<Token> String(char quote);

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
};

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Python string literal escapes; an unknown escape keeps its backslash, as Python does.
absl::StatusOr<Token> Lexer::String(char quote) {
  Token t;
  t.type = Token::Type::kString;
  t.line = line_;
  ++pos_;
  while (true) {
    if (pos_ >= s_.size()) return Error("unterminated string literal");
    char c = s_[pos_++];
    if (c == quote) return t;
    if (c == '\n') ++line_;
    if (c != '\\' || pos_ >= s_.size()) {
      t.text.push_back(c);
      continue;
    }
    const char e = s_[pos_++];
    int hex_digits = 0;
    switch (e) {
      case 'n':
        t.text += '\n';
        break;
      case 't':
        t.text += '\t';
        break;
      case 'r':
        t.text += '\r';
        break;
      case '0':
        t.text += '\0';
        break;
      case '\\':
      case '\'':
      case '"':
        t.text += e;
        break;
      case '\n':
        ++line_;
        break;  // line continuation
      case 'x':
        hex_digits = 2;
        break;
      case 'u':
        hex_digits = 4;
        break;
      case 'U':
        hex_digits = 8;
        break;
      default:
        t.text += '\\';
        t.text += e;
    }
    if (hex_digits) {
      if (pos_ + hex_digits > s_.size()) return Error("truncated \\x/\\u escape");
      const std::string h = s_.substr(pos_, hex_digits);
      char* end = nullptr;
      const unsigned long cp = std::strtoul(h.c_str(), &end, 16);
      if (end != h.c_str() + hex_digits || cp > 0x10FFFF) return Error("bad \\x/\\u escape");
      AppendUtf8(static_cast<uint32_t>(cp), &t.text);
      pos_ += hex_digits;
    }
  }
}

std::string Normalize(std::string_view src, const LexOptions& o) {
  std::string s;
  s.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      s.push_back('\n');
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      s.push_back(src[i]);
    }
  }
  if (!o.keep_trailing_newline && !s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

bool IsBlockLike(const Raw& r) {
  return r.kind == Raw::Kind::kStatement || r.kind == Raw::Kind::kComment;
}

// The text after whitespace control by the tags on either side of it.
std::string Controlled(const Raw& text, const Raw* before, const Raw* after, const LexOptions& o) {
  std::string t = text.text;
  if (after && after->strip_left) {
    size_t n = t.size();
    while (n > 0 && IsSpace(t[n - 1])) --n;
    t.resize(n);
  } else if (after && o.lstrip_blocks && IsBlockLike(*after) && !after->keep_left) {
    size_t n = t.size();
    while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t')) --n;
    // Blanks at a line's start (or the template's) go; after a tag on the same line they stay.
    if ((n > 0 && t[n - 1] == '\n') || (n == 0 && text.at_start)) t.resize(n);
  }
  if (before && before->strip_right) {
    size_t n = 0;
    while (n < t.size() && IsSpace(t[n])) ++n;
    t.erase(0, n);
  } else if (before && o.trim_blocks && IsBlockLike(*before) && !t.empty() && t[0] == '\n') {
    t.erase(0, 1);
  }
  return t;
}

}  // namespace

absl::StatusOr<std::vector<Segment>> Lex(std::string_view source, const LexOptions& options) {
  if (source.size() > kMaxTemplateBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "template of ", source.size(), " bytes is over the limit of ", kMaxTemplateBytes));
  }
  auto raws = Lexer(Normalize(source, options)).Run();
  if (!raws.ok()) return raws.status();
  std::vector<Segment> out;
  for (size_t i = 0; i < raws->size(); ++i) {
    Raw& r = (*raws)[i];
    if (r.kind == Raw::Kind::kComment) continue;
    Segment seg;
    seg.line = r.line;
    if (r.kind == Raw::Kind::kText) {
      const Raw* before = i > 0 ? &(*raws)[i - 1] : nullptr;
      const Raw* after = i + 1 < raws->size() ? &(*raws)[i + 1] : nullptr;
      seg.text = Controlled(r, before, after, options);
      if (seg.text.empty()) continue;
    } else {
      seg.kind = r.kind == Raw::Kind::kOutput ? Segment::Kind::kOutput : Segment::Kind::kStatement;
      seg.tokens = std::move(r.tokens);
    }
    out.push_back(std::move(seg));
  }
  return out;
}

}  // namespace pinfer::jinja
