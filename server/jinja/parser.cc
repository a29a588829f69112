// Segments -> statements; tag tokens -> expressions, with Jinja's precedence: conditional,
// or, and, not, comparisons, + -, ~, * / // %, **, unary - +, then postfix (.a [i] (call))
// and filters/tests (| f, is t), which bind tighter than every binary operator.
#include "server/jinja/parser.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "server/jinja/builtins.h"

namespace pinfer::jinja {
namespace {

using TT = Token::Type;

class ExprParser {
 public:
  ExprParser(const std::vector<Token>& t, size_t pos) : t_(t), pos_(pos) {}
  size_t pos() const { return pos_; }
  const Token& Peek(size_t k = 0) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  bool IsOp(std::string_view op, size_t k = 0) const {
    return Peek(k).type == TT::kOp && Peek(k).text == op;
  }
  bool IsName(std::string_view n, size_t k = 0) const {
    return Peek(k).type == TT::kName && Peek(k).text == n;
  }
  bool AtEnd() const { return Peek().type == TT::kEnd; }
  void Skip() { ++pos_; }

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("template line ", Peek().line, ": ", what));
  }
  absl::Status Expect(std::string_view op) {
    if (!IsOp(op)) return Error(absl::StrCat("expected '", std::string(op), "'"));
    Skip();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Peek().type != TT::kName) return Error("expected a name");
    return t_[pos_++].text;
  }

  // A full expression; a bare tuple ("a, b") when allow_tuple.
  absl::StatusOr<ExprPtr> Parse(bool allow_tuple = false) {
    auto first = Cond();
    if (!first.ok() || !allow_tuple || !IsOp(",")) return first;
    auto tuple = std::make_shared<Expr>();
    tuple->kind = Expr::Kind::kTuple;
    tuple->args.push_back(*first);
    while (IsOp(",")) {
      Skip();
      if (AtEnd() || IsOp("=") || IsOp(")")) break;  // (1,): a one-item tuple
      auto e = Cond();
      if (!e.ok()) return e;
      tuple->args.push_back(*e);
    }
    return ExprPtr(tuple);
  }

  absl::StatusOr<ExprPtr> Or() { return BinaryLevel(0); }

 private:
  struct DepthGuard {
    explicit DepthGuard(int* d) : d_(d) { ++*d_; }
    ~DepthGuard() { --*d_; }
    int* d_;
  };
  absl::Status Deep() const {
    return depth_ > kMaxExpressionDepth
               ? Error(absl::StrCat("expression nested deeper than ", kMaxExpressionDepth))
               : absl::OkStatus();
  }

  static ExprPtr Node(Expr::Kind k, std::string name, std::vector<ExprPtr> args, int line) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->name = std::move(name);
    e->args = std::move(args);
    e->line = line;
    return e;
  }

  absl::StatusOr<ExprPtr> Cond() {
    DepthGuard g(&depth_);
    if (auto st = Deep(); !st.ok()) return st;
    auto then = Or();
    if (!then.ok()) return then;
    ExprPtr result = *then;
    while (IsName("if")) {
      const int line = Peek().line;
      Skip();
      auto cond = Or();
      if (!cond.ok()) return cond;
      ExprPtr other;
      if (IsName("else")) {
        Skip();
        auto e = Cond();
        if (!e.ok()) return e;
        other = *e;
      }
      result = Node(Expr::Kind::kCond, "", {*cond, result, other}, line);
    }
    return result;
  }

  // Levels: 0 or, 1 and, 2 not, 3 compare, 4 + -, 5 ~, 6 * / // %, 7 **, then unary.
  absl::StatusOr<ExprPtr> BinaryLevel(int level) {
    DepthGuard g(&depth_);
    if (auto st = Deep(); !st.ok()) return st;
    if (level == 2) return NotLevel();
    if (level == 3) return Compare();
    if (level == 8) return Unary(true);
    static const std::vector<std::vector<std::string>> kOps = {
        {"or"}, {"and"}, {}, {}, {"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
    auto left = BinaryLevel(level + 1);
    if (!left.ok()) return left;
    ExprPtr result = *left;
    while (true) {
      std::string op;
      for (const std::string& o : kOps[level]) {
        if ((level <= 1 && IsName(o)) || (level > 1 && IsOp(o))) op = o;
      }
      if (op.empty()) return result;
      const int line = Peek().line;
      Skip();
      auto right = BinaryLevel(level + 1);
      if (!right.ok()) return right;
      result = Node(Expr::Kind::kBinary, op, {result, *right}, line);
    }
  }

  absl::StatusOr<ExprPtr> NotLevel() {
    if (IsName("not")) {
      const int line = Peek().line;
      Skip();
      DepthGuard g(&depth_);
      if (auto st = Deep(); !st.ok()) return st;
      auto e = NotLevel();
      if (!e.ok()) return e;
      return Node(Expr::Kind::kUnary, "not", {*e}, line);
    }
    return BinaryLevel(3);
  }

  absl::StatusOr<ExprPtr> Compare() {
    auto left = BinaryLevel(4);
    if (!left.ok()) return left;
    auto cmp = std::make_shared<Expr>();
    cmp->kind = Expr::Kind::kCompare;
    cmp->line = Peek().line;
    cmp->args.push_back(*left);
    while (true) {
      std::string op;
      if (Peek().type == TT::kOp &&
          (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" ||
           Peek().text == "<=" || Peek().text == ">" || Peek().text == ">=")) {
        op = Peek().text;
        Skip();
      } else if (IsName("in")) {
        op = "in";
        Skip();
      } else if (IsName("not") && IsName("in", 1)) {
        op = "notin";
        Skip();
        Skip();
      } else {
        break;
      }
      auto right = BinaryLevel(4);
      if (!right.ok()) return right;
      cmp->ops.push_back(op);
      cmp->args.push_back(*right);
    }
    if (cmp->ops.empty()) return *left;
    return ExprPtr(cmp);
  }

  absl::StatusOr<ExprPtr> Unary(bool with_filter) {
    DepthGuard g(&depth_);
    if (auto st = Deep(); !st.ok()) return st;
    absl::StatusOr<ExprPtr> node;
    if (IsOp("-") || IsOp("+")) {
      const std::string op = Peek().text;
      const int line = Peek().line;
      Skip();
      auto inner = Unary(false);
      if (!inner.ok()) return inner;
      node = Node(Expr::Kind::kUnary, op, {*inner}, line);
    } else {
      node = Primary();
    }
    if (!node.ok()) return node;
    node = Postfix(*node);
    if (node.ok() && with_filter) node = Filters(*node);
    return node;
  }

  absl::StatusOr<ExprPtr> Primary();
  absl::StatusOr<ExprPtr> Postfix(ExprPtr node);
  absl::StatusOr<ExprPtr> Filters(ExprPtr node);
  absl::Status CallArgsInto(Expr* call);
  absl::StatusOr<ExprPtr> Subscript(ExprPtr obj);

  const std::vector<Token>& t_;
  size_t pos_;
  int depth_ = 0;
};

absl::StatusOr<ExprPtr> ExprParser::Primary() {
  const Token& tok = Peek();
  auto lit = [&](Value v) {
    auto e = std::make_shared<Expr>();
    e->kind = Expr::Kind::kLiteral;
    e->value = std::move(v);
    e->line = tok.line;
    return ExprPtr(e);
  };
  if (tok.type == TT::kName) {
    const std::string n = tok.text;
    Skip();
    if (n == "true" || n == "True") return lit(Value::Bool(true));
    if (n == "false" || n == "False") return lit(Value::Bool(false));
    if (n == "none" || n == "None") return lit(Value::None());
    return Node(Expr::Kind::kName, n, {}, tok.line);
  }
  if (tok.type == TT::kString) {
    std::string s;
    while (Peek().type == TT::kString) s += t_[pos_++].text;  // adjacent literals join
    return lit(Value::String(std::move(s)));
  }
  if (tok.type == TT::kInt) {
    Skip();
    return lit(Value::Int(tok.int_value));
  }
  if (tok.type == TT::kFloat) {
    Skip();
    return lit(Value::Float(tok.float_value));
  }
  const int line = tok.line;
  if (IsOp("(")) {
    Skip();
    if (IsOp(")")) {
      Skip();
      return Node(Expr::Kind::kTuple, "", {}, line);
    }
    auto inner = Parse(true);
    if (!inner.ok()) return inner;
    if (auto st = Expect(")"); !st.ok()) return st;
    return inner;
  }
  if (IsOp("[") || IsOp("{")) {
    const bool dict = IsOp("{");
    const std::string close = dict ? "}" : "]";
    Skip();
    std::vector<ExprPtr> items;
    while (!IsOp(close)) {
      auto e = Cond();
      if (!e.ok()) return e;
      items.push_back(*e);
      if (dict) {
        if (auto st = Expect(":"); !st.ok()) return st;
        auto v = Cond();
        if (!v.ok()) return v;
        items.push_back(*v);
      }
      if (!IsOp(",")) break;
      Skip();
    }
    if (auto st = Expect(close); !st.ok()) return st;
    return Node(dict ? Expr::Kind::kDict : Expr::Kind::kList, "", std::move(items), line);
  }
  if (AtEnd()) return Error("expected an expression, found the end of the tag");
  return Error(absl::StrCat("unexpected '", tok.text, "'"));
}

absl::Status ExprParser::CallArgsInto(Expr* call) {
  Skip();  // (
  while (!IsOp(")")) {
    if (Peek().type == TT::kName && IsOp("=", 1)) {
      const std::string key = Peek().text;
      Skip();
      Skip();
      auto v = Cond();
      if (!v.ok()) return v.status();
      call->kwargs.push_back({key, *v});
    } else {
      if (IsOp("*")) return Error("*args in calls is not supported");
      auto v = Cond();
      if (!v.ok()) return v.status();
      call->args.push_back(*v);
    }
    if (!IsOp(",")) break;
    Skip();
  }
  return Expect(")");
}

absl::StatusOr<ExprPtr> ExprParser::Subscript(ExprPtr obj) {
  const int line = Peek().line;
  Skip();  // [
  std::vector<ExprPtr> parts = {obj};
  bool slice = false;
  for (int k = 0; k < 3; ++k) {
    if (!IsOp(":") && !IsOp("]")) {
      auto e = Cond();
      if (!e.ok()) return e;
      parts.push_back(*e);
    } else {
      parts.push_back(nullptr);
    }
    if (!IsOp(":")) break;
    slice = true;
    Skip();
  }
  if (auto st = Expect("]"); !st.ok()) return st;
  if (!slice) return Node(Expr::Kind::kItem, "", {obj, parts[1]}, line);
  parts.resize(4);
  return Node(Expr::Kind::kSlice, "", std::move(parts), line);
}

absl::StatusOr<ExprPtr> ExprParser::Postfix(ExprPtr node) {
  while (true) {
    if (IsOp(".")) {
      const int line = Peek().line;
      Skip();
      if (Peek().type == TT::kInt) {  // x.0: item 0
        auto idx = std::make_shared<Expr>();
        idx->value = Value::Int(Peek().int_value);
        Skip();
        node = Node(Expr::Kind::kItem, "", {node, idx}, line);
        continue;
      }
      auto name = ExpectName();
      if (!name.ok()) return name.status();
      node = Node(Expr::Kind::kAttr, *name, {node}, line);
    } else if (IsOp("[")) {
      auto s = Subscript(node);
      if (!s.ok()) return s;
      node = *s;
    } else if (IsOp("(")) {
      auto call = std::make_shared<Expr>();
      call->kind = Expr::Kind::kCall;
      call->line = Peek().line;
      call->args.push_back(node);
      if (auto st = CallArgsInto(call.get()); !st.ok()) return st;
      node = call;
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExprParser::Filters(ExprPtr node) {
  while (IsOp("|") || IsName("is")) {
    const bool filter = IsOp("|");
    auto e = std::make_shared<Expr>();
    e->kind = filter ? Expr::Kind::kFilter : Expr::Kind::kTest;
    e->line = Peek().line;
    Skip();
    if (!filter && IsName("not")) {
      e->negated = true;
      Skip();
    }
    // Test names may be keywords ("is none", "is true", "is in").
    auto name = ExpectName();
    if (!name.ok()) return name.status();
    while (filter && IsOp(".")) {  // dotted filter names are not Jinja's, refuse clearly
      return Error(absl::StrCat("unsupported filter '", *name, ".'"));
    }
    e->name = *name;
    if (filter ? !IsKnownFilter(e->name) : !IsKnownTest(e->name)) {
      return absl::UnimplementedError(absl::StrCat("template line ", e->line, ": ",
                                                   filter ? "filter '" : "test '", e->name,
                                                   "' is not supported"));
    }
    e->args.push_back(node);
    if (IsOp("(")) {
      if (auto st = CallArgsInto(e.get()); !st.ok()) return st;
    } else if (!filter && (Peek().type == TT::kString || Peek().type == TT::kInt ||
                           Peek().type == TT::kFloat ||
                           (Peek().type == TT::kName && !IsName("and") && !IsName("or") &&
                            !IsName("else") && !IsName("if") && !IsName("not") && !IsName("in")))) {
      auto arg = Unary(false);  // "is divisibleby 3", "is sameas none"
      if (!arg.ok()) return arg;
      e->args.push_back(*arg);
    }
    node = e;
  }
  return node;
}

}  // namespace

absl::StatusOr<ExprPtr> ParseExpression(const std::vector<Token>& tokens, size_t* pos,
                                        bool allow_tuple, bool no_condition) {
  ExprParser p(tokens, *pos);
  auto e = no_condition ? p.Or() : p.Parse(allow_tuple);
  *pos = p.pos();
  return e;
}

}  // namespace pinfer::jinja
