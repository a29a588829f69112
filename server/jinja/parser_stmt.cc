// Statement tags: if/elif/else, for/else, set (and block set), macro, break, continue,
// generation; anything else is named as unsupported.
#include <set>

#include "absl/strings/str_cat.h"
#include "server/jinja/parser.h"

namespace pinfer::jinja {
namespace {

using TT = Token::Type;

class StmtParser {
 public:
  explicit StmtParser(const std::vector<Segment>& s) : segs_(s) {}

  absl::StatusOr<Body> Run() {
    auto body = ParseBody({});
    if (!body.ok()) return body.status();
    if (idx_ < segs_.size())
      return Error(segs_[idx_].line, "unexpected '" + Keyword(segs_[idx_]) + "'");
    return std::move(body->first);
  }

 private:
  static absl::Status Error(int line, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("template line ", line, ": ", what));
  }
  static std::string Keyword(const Segment& s) {
    return s.tokens.empty() || s.tokens[0].type != TT::kName ? "" : s.tokens[0].text;
  }

  // Statements until a tag whose keyword is in `ends` (left unconsumed) or the end.
  absl::StatusOr<std::pair<Body, std::string>> ParseBody(const std::set<std::string>& ends) {
    if (++depth_ > kMaxBlockDepth) {
      return Error(idx_ < segs_.size() ? segs_[idx_].line : 0,
                   absl::StrCat("blocks nested deeper than ", kMaxBlockDepth));
    }
    Body body;
    while (idx_ < segs_.size()) {
      const Segment& seg = segs_[idx_];
      if (seg.kind == Segment::Kind::kStatement && ends.count(Keyword(seg))) {
        --depth_;
        return std::make_pair(std::move(body), Keyword(seg));
      }
      auto st = ParseOne(&body);
      if (!st.ok()) return st;
    }
    if (!ends.empty()) {
      return Error(
          segs_.empty() ? 0 : segs_.back().line,
          absl::StrCat("missing '{% ", *ends.rbegin(), " %}' before the end of the template"));
    }
    --depth_;
    return std::make_pair(std::move(body), std::string());
  }

  absl::Status ParseOne(Body* body) {
    const Segment& seg = segs_[idx_];
    auto s = std::make_shared<Stmt>();
    s->line = seg.line;
    if (seg.kind == Segment::Kind::kText) {
      s->kind = Stmt::Kind::kText;
      s->text = seg.text;
      ++idx_;
    } else if (seg.kind == Segment::Kind::kOutput) {
      size_t pos = 0;
      auto e = ParseExpression(seg.tokens, &pos, true);
      if (!e.ok()) return e.status();
      if (seg.tokens[pos].type != TT::kEnd)
        return Error(seg.line, "unexpected '" + seg.tokens[pos].text + "' in {{ }}");
      s->kind = Stmt::Kind::kOutput;
      s->expr = *e;
      ++idx_;
    } else {
      auto st = Statement(s.get());
      if (!st.ok()) return st;
    }
    body->push_back(s);
    return absl::OkStatus();
  }

  absl::Status Statement(Stmt* s) {
    const Segment& seg = segs_[idx_];
    const std::string kw = Keyword(seg);
    if (kw == "if") return If(s);
    if (kw == "for") return For(s);
    if (kw == "set") return Set(s);
    if (kw == "macro") return Macro(s);
    if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      if (loops_ == 0) return Error(seg.line, "'" + kw + "' outside a loop");
      return End(1);
    }
    if (kw == "generation") {
      s->kind = Stmt::Kind::kBlock;
      return Block(s, "endgeneration");
    }
    static const std::set<std::string> kKnownElsewhere = {"call", "filter",     "include", "import",
                                                          "from", "extends",    "block",   "with",
                                                          "do",   "autoescape", "trans"};
    if (kKnownElsewhere.count(kw)) {
      return absl::UnimplementedError(
          absl::StrCat("template line ", seg.line, ": '{% ", kw, " %}' is not supported"));
    }
    return Error(seg.line, kw.empty() ? "a tag without a statement"
                                      : "unknown or misplaced tag '" + kw + "'");
  }

  // The current tag must end after `consumed` tokens; moves to the next segment.
  absl::Status End(size_t consumed) {
    const Segment& seg = segs_[idx_];
    if (seg.tokens[consumed].type != TT::kEnd) {
      return Error(seg.line,
                   "unexpected '" + seg.tokens[consumed].text + "' in '" + Keyword(seg) + "'");
    }
    ++idx_;
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> Expression(size_t* pos, bool no_condition = false) {
    return ParseExpression(segs_[idx_].tokens, pos, false, no_condition);
  }

  absl::Status Block(Stmt* s, const std::string& end, size_t consumed = 1) {
    if (auto st = End(consumed); !st.ok()) return st;
    auto b = ParseBody({end});
    if (!b.ok()) return b.status();
    s->body = std::move(b->first);
    return End(1);
  }

  absl::Status If(Stmt* s) {
    s->kind = Stmt::Kind::kIf;
    while (true) {
      size_t pos = 1;
      auto cond = Expression(&pos);
      if (!cond.ok()) return cond.status();
      if (auto st = End(pos); !st.ok()) return st;
      auto b = ParseBody({"elif", "else", "endif"});
      if (!b.ok()) return b.status();
      s->branches.push_back({*cond, std::move(b->first)});
      if (b->second == "elif") continue;
      if (b->second == "else") {
        if (auto st = End(1); !st.ok()) return st;
        auto e = ParseBody({"endif"});
        if (!e.ok()) return e.status();
        s->else_body = std::move(e->first);
      }
      return End(1);
    }
  }

  absl::Status Targets(size_t* pos, Stmt* s) {
    const auto& t = segs_[idx_].tokens;
    const bool paren = t[*pos].type == TT::kOp && t[*pos].text == "(";
    if (paren) ++*pos;
    while (true) {
      if (t[*pos].type != TT::kName) return Error(segs_[idx_].line, "expected a variable name");
      s->targets.push_back(t[(*pos)++].text);
      if (!(t[*pos].type == TT::kOp && t[*pos].text == ",")) break;
      ++*pos;
    }
    if (paren) {
      if (!(t[*pos].type == TT::kOp && t[*pos].text == ")"))
        return Error(segs_[idx_].line, "expected ')'");
      ++*pos;
    }
    return absl::OkStatus();
  }

  absl::Status For(Stmt* s) {
    s->kind = Stmt::Kind::kFor;
    size_t pos = 1;
    if (auto st = Targets(&pos, s); !st.ok()) return st;
    const auto& t = segs_[idx_].tokens;
    if (!(t[pos].type == TT::kName && t[pos].text == "in"))
      return Error(segs_[idx_].line, "expected 'in' in 'for'");
    ++pos;
    auto iter = Expression(&pos, true);
    if (!iter.ok()) return iter.status();
    s->expr = *iter;
    if (t[pos].type == TT::kName && t[pos].text == "if") {
      ++pos;
      auto f = Expression(&pos, true);
      if (!f.ok()) return f.status();
      s->filter = *f;
    }
    if (t[pos].type == TT::kName && t[pos].text == "recursive") {
      return absl::UnimplementedError(absl::StrCat("template line ", segs_[idx_].line,
                                                   ": recursive for loops are not supported"));
    }
    if (auto st = End(pos); !st.ok()) return st;
    ++loops_;
    auto b = ParseBody({"else", "endfor"});
    --loops_;
    if (!b.ok()) return b.status();
    s->body = std::move(b->first);
    if (b->second == "else") {
      if (auto st = End(1); !st.ok()) return st;
      auto e = ParseBody({"endfor"});
      if (!e.ok()) return e.status();
      s->else_body = std::move(e->first);
    }
    return End(1);
  }

  absl::Status Set(Stmt* s) {
    size_t pos = 1;
    const auto& t = segs_[idx_].tokens;
    if (auto st = Targets(&pos, s); !st.ok()) return st;
    if (s->targets.size() == 1 && t[pos].type == TT::kOp && t[pos].text == ".") {
      if (t[pos + 1].type != TT::kName)
        return Error(segs_[idx_].line, "expected an attribute name");
      s->attr = t[pos + 1].text;
      pos += 2;
    }
    if (t[pos].type == TT::kEnd && s->targets.size() == 1 && s->attr.empty()) {
      s->kind = Stmt::Kind::kSetBlock;
      return Block(s, "endset", pos);
    }
    if (!(t[pos].type == TT::kOp && t[pos].text == "="))
      return Error(segs_[idx_].line, "expected '=' in 'set'");
    ++pos;
    s->kind = Stmt::Kind::kSet;
    auto e = ParseExpression(t, &pos, true);
    if (!e.ok()) return e.status();
    s->expr = *e;
    return End(pos);
  }

  absl::Status Macro(Stmt* s) {
    s->kind = Stmt::Kind::kMacro;
    const auto& t = segs_[idx_].tokens;
    size_t pos = 1;
    if (t[pos].type != TT::kName) return Error(segs_[idx_].line, "expected the macro's name");
    s->name = t[pos++].text;
    if (!(t[pos].type == TT::kOp && t[pos].text == "("))
      return Error(segs_[idx_].line, "expected '(' after the macro's name");
    ++pos;
    while (!(t[pos].type == TT::kOp && t[pos].text == ")")) {
      if (t[pos].type != TT::kName) return Error(segs_[idx_].line, "expected a parameter name");
      std::pair<std::string, ExprPtr> p{t[pos++].text, nullptr};
      if (t[pos].type == TT::kOp && t[pos].text == "=") {
        ++pos;
        auto d = Expression(&pos);
        if (!d.ok()) return d.status();
        p.second = *d;
      }
      s->params.push_back(std::move(p));
      if (!(t[pos].type == TT::kOp && t[pos].text == ",")) break;
      ++pos;
    }
    if (!(t[pos].type == TT::kOp && t[pos].text == ")"))
      return Error(segs_[idx_].line, "expected ')'");
    if (auto st = End(pos + 1); !st.ok()) return st;
    const int saved = loops_;
    loops_ = 0;
    auto b = ParseBody({"endmacro"});
    loops_ = saved;
    if (!b.ok()) return b.status();
    s->body = std::move(b->first);
    return End(1);
  }

  const std::vector<Segment>& segs_;
  size_t idx_ = 0;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

absl::StatusOr<Body> ParseTemplate(const std::vector<Segment>& segments) {
  return StmtParser(segments).Run();
}

}  // namespace pinfer::jinja
