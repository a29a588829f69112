// Expressions: names (undefined when absent), literals, containers, attributes and items,
// slices, calls, filters, tests, and the operators with Python's semantics.
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/jinja/builtins.h"
#include "server/jinja/marks.h"
#include "server/jinja/renderer.h"
#include "server/jinja/utf8_text.h"

namespace pinfer::jinja {

absl::StatusOr<CallArgs> Renderer::EvalArgs(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) {
    auto v = Eval(*e.args[i]);
    if (!v.ok()) return v.status();
    args.positional.push_back(std::move(*v));
  }
  for (const auto& [k, x] : e.kwargs) {
    auto v = Eval(*x);
    if (!v.ok()) return v.status();
    args.keyword.push_back({k, std::move(*v)});
  }
  return args;
}

namespace {

// Python's integers have no bound; these have 64 bits, and a result beyond them is an error,
// never a wrapped (or undefined) value.
constexpr const char* kIntOverflow = "integer overflow: the result does not fit in 64 bits";

absl::Status UndefinedUse(const Value& v, int line) {
  return absl::InvalidArgumentError(
      absl::StrCat("template line ", line, ": ", v.s().empty() ? "undefined value" : v.s()));
}

}  // namespace

absl::StatusOr<Value> Renderer::Eval(const Expr& e) {
  absl::StatusOr<Value> v = EvalNode(e);
  if (!v.ok()) return v;
  if (v->is_string() && static_cast<int64_t>(v->s().size()) > kMaxStringBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "template line ", e.line, ": a string longer than ", kMaxStringBytes, " bytes"));
  }
  if (v->depth() > kMaxValueDepth || v->nodes() > kMaxValueNodes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("template line ", e.line, ": a value nested deeper than ", kMaxValueDepth,
                     " or holding more than ", kMaxValueNodes, " values"));
  }
  // A namespace is read by reference (its nodes() is what it may hold, not what it holds).
  work_ += v->is_string()                         ? static_cast<int64_t>(v->s().size())
           : v->kind() == Value::Kind::kNamespace ? 1
                                                  : v->nodes();
  if (work_ > max_work_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "template line ", e.line, ": more than ", max_work_,
        " bytes of strings and values computed in one render (a loop over large values)"));
  }
  return v;
}

absl::StatusOr<Value> Renderer::EvalNode(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.value;
    case Expr::Kind::kName: {
      const Value* v = Lookup(e.name);
      return v ? *v : Value::Undefined(absl::StrCat("'", e.name, "' is undefined"));
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      auto args = EvalArgs(e, 0);
      if (!args.ok()) return args.status();
      return e.kind == Expr::Kind::kList ? Value::MakeList(std::move(args->positional))
                                         : Value::Tuple(std::move(args->positional));
    }
    case Expr::Kind::kDict: {
      auto args = EvalArgs(e, 0);
      if (!args.ok()) return args.status();
      Value d = Value::MakeDict();
      for (size_t i = 0; i + 1 < args->positional.size(); i += 2)
        d.Set(args->positional[i], args->positional[i + 1]);
      return d;
    }
    case Expr::Kind::kAttr:
    case Expr::Kind::kItem: {
      auto obj = Eval(*e.args[0]);
      if (!obj.ok()) return obj;
      if (obj->is_undefined()) return UndefinedUse(*obj, e.line);
      if (e.kind == Expr::Kind::kAttr) return GetAttribute(*obj, e.name);
      auto key = Eval(*e.args[1]);
      if (!key.ok()) return key;
      return GetItem(*obj, *key);
    }
    case Expr::Kind::kSlice:
      return EvalSlice(e);
    case Expr::Kind::kCall:
      return EvalCall(e);
    case Expr::Kind::kFilter:
    case Expr::Kind::kTest: {
      auto v = Eval(*e.args[0]);
      if (!v.ok()) return v;
      auto args = EvalArgs(e, 1);
      if (!args.ok()) return args.status();
      if (e.kind == Expr::Kind::kFilter) {
        auto r = ApplyFilter(e.name, *v, *args);
        if (!r.ok() && r.status().code() == absl::StatusCode::kInvalidArgument) {
          return Error(e.line, std::string(r.status().message()));
        }
        return r;
      }
      auto t = ApplyTest(e.name, *v, *args);
      if (!t.ok()) return t.status();
      return Value::Bool(*t != e.negated);
    }
    case Expr::Kind::kUnary: {
      auto v = Eval(*e.args[0]);
      if (!v.ok()) return v;
      if (e.name == "not") return Value::Bool(!v->Truthy());
      if (v->is_undefined()) return UndefinedUse(*v, e.line);
      if (!v->is_number())
        return Error(
            e.line, absl::StrCat("bad operand type for unary ", e.name, ": '", v->TypeName(), "'"));
      if (e.name == "+") return v->kind() == Value::Kind::kFloat ? *v : Value::Int(v->i());
      if (v->kind() == Value::Kind::kFloat) return Value::Float(-v->f());
      if (v->i() == std::numeric_limits<int64_t>::min()) return Error(e.line, kIntOverflow);
      return Value::Int(-v->i());
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e);
    case Expr::Kind::kCompare:
      return EvalCompare(e);
    case Expr::Kind::kCond: {
      auto c = Eval(*e.args[0]);
      if (!c.ok()) return c;
      if (c->Truthy()) return Eval(*e.args[1]);
      if (e.args[2]) return Eval(*e.args[2]);
      return Value::Undefined("the conditional expression's else branch is undefined");
    }
  }
  return Value();
}

absl::StatusOr<Value> Renderer::EvalCall(const Expr& e) {
  auto callee = Eval(*e.args[0]);
  if (!callee.ok()) return callee;
  if (callee->is_undefined()) return UndefinedUse(*callee, e.line);
  if (!callee->is_callable()) {
    return Error(e.line, absl::StrCat("'", callee->TypeName(), "' object is not callable"));
  }
  auto args = EvalArgs(e, 1);
  if (!args.ok()) return args.status();
  auto r = callee->fn()(*args);
  if (!r.ok() && r.status().code() == absl::StatusCode::kInvalidArgument &&
      !absl::StartsWith(r.status().message(), "template")) {
    return Error(e.line, std::string(r.status().message()));
  }
  return r;
}

absl::StatusOr<Value> Renderer::EvalBinary(const Expr& e) {
  auto a = Eval(*e.args[0]);
  if (!a.ok()) return a;
  if (e.name == "and") return a->Truthy() ? Eval(*e.args[1]) : a;
  if (e.name == "or") return a->Truthy() ? a : Eval(*e.args[1]);
  auto b = Eval(*e.args[1]);
  if (!b.ok()) return b;
  if (e.name != "~") {
    if (a->is_undefined()) return UndefinedUse(*a, e.line);
    if (b->is_undefined()) return UndefinedUse(*b, e.line);
  }
  auto r = BinaryOp(e.name, *a, *b);
  if (r.ok()) return r;
  if (absl::IsUnimplemented(r.status())) {  // stays Unimplemented: callers fall back on it
    return absl::UnimplementedError(
        absl::StrCat("template line ", e.line, ": ", r.status().message()));
  }
  return Error(e.line, std::string(r.status().message()));
}

namespace {

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'in <string>' requires string as left operand, not ", item.TypeName()));
    }
    return container.s().find(item.s()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.list()) {
      if (Equals(v, item)) return true;
    }
    return false;
  }
  if (container.is_mapping()) return container.Find(item) != nullptr;
  if (container.is_undefined()) return false;
  return absl::InvalidArgumentError(
      absl::StrCat("argument of type '", container.TypeName(), "' is not iterable"));
}

absl::StatusOr<bool> CompareOne(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "in") return Contains(b, a);
  if (op == "notin") {
    auto c = Contains(b, a);
    if (!c.ok()) return c;
    return !*c;
  }
  if (op == "<") return Less(a, b);
  if (op == ">") return Less(b, a);
  if (op == "<=") {
    auto l = Less(b, a);
    if (!l.ok()) return l;
    return !*l;
  }
  auto l = Less(a, b);  // >=
  if (!l.ok()) return l;
  return !*l;
}

}  // namespace

absl::StatusOr<Value> Renderer::EvalCompare(const Expr& e) {
  auto left = Eval(*e.args[0]);
  if (!left.ok()) return left;
  Value a = *left;
  for (size_t i = 0; i < e.ops.size(); ++i) {
    auto b = Eval(*e.args[i + 1]);
    if (!b.ok()) return b;
    auto r = CompareOne(e.ops[i], a, *b);
    if (!r.ok()) return Error(e.line, std::string(r.status().message()));
    if (!*r) return Value::Bool(false);
    a = *b;
  }
  return Value::Bool(true);
}

absl::StatusOr<Value> Renderer::EvalSlice(const Expr& e) {
  auto obj = Eval(*e.args[0]);
  if (!obj.ok()) return obj;
  if (obj->is_undefined()) return UndefinedUse(*obj, e.line);
  int64_t bounds[3] = {0, 0, 1};
  bool given[3] = {false, false, false};
  for (int k = 0; k < 3; ++k) {
    if (!e.args[k + 1]) continue;
    auto v = Eval(*e.args[k + 1]);
    if (!v.ok()) return v;
    if (v->is_none()) continue;
    if (v->kind() != Value::Kind::kInt && v->kind() != Value::Kind::kBool) {
      return Error(e.line, "slice indices must be integers or None");
    }
    bounds[k] = v->i();
    given[k] = true;
  }
  if (bounds[2] == 0) return Error(e.line, "slice step cannot be zero");
  const bool is_str = obj->is_string();
  if (!is_str && !obj->is_list())
    return Error(e.line, absl::StrCat("'", obj->TypeName(), "' object is not subscriptable"));
  // A string's characters as SplitCodePoints cuts them (CodePointCount can differ on bytes
  // that are not UTF-8), without a value per character.
  std::vector<size_t> starts;
  if (is_str) starts = CharacterStarts(obj->s());
  const int64_t n =
      is_str ? static_cast<int64_t>(starts.size()) - 1 : static_cast<int64_t>(obj->list().size());
  const int64_t step = bounds[2];
  auto clamp = [&](int64_t v, bool has, bool is_start) -> int64_t {
    if (!has) return step > 0 ? (is_start ? 0 : n) : (is_start ? n - 1 : -1);
    if (v < 0) v += n;
    if (step > 0) return std::clamp<int64_t>(v, 0, n);
    return std::clamp<int64_t>(v, -1, n - 1);
  };
  const int64_t start = clamp(bounds[0], given[0], true), stop = clamp(bounds[1], given[1], false);
  MarkedText s;
  List items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (is_str)
      s.Append(Substring(*obj, starts[i], starts[i + 1] - starts[i]));
    else
      items.push_back(obj->list()[i]);
    if (__builtin_add_overflow(i, step, &i)) break;  // past either end of the sequence
  }
  if (is_str) return s.ToValue();
  return obj->kind() == Value::Kind::kTuple ? Value::Tuple(std::move(items))
                                            : Value::MakeList(std::move(items));
}

namespace {

// + - * ** on integers, an error where Python's result would not fit in 64 bits.
absl::StatusOr<Value> IntOp(const std::string& op, int64_t a, int64_t b) {
  int64_t r = 0;
  bool overflow = false;
  if (op == "+") {
    overflow = __builtin_add_overflow(a, b, &r);
  } else if (op == "-") {
    overflow = __builtin_sub_overflow(a, b, &r);
  } else if (op == "*") {
    overflow = __builtin_mul_overflow(a, b, &r);
  } else if (b < 0) {  // a ** -n is a float, as in Python
    return Value::Float(std::pow(static_cast<double>(a), static_cast<double>(b)));
  } else if (a == 0 || a == 1 || a == -1) {
    r = a == -1 ? (b % 2 ? -1 : 1) : (b == 0 ? 1 : a);
  } else {
    r = 1;  // |a| >= 2: at most 63 factors before it overflows
    for (int64_t k = 0; k < b && !overflow; ++k) overflow = __builtin_mul_overflow(r, a, &r);
  }
  if (overflow) return absl::InvalidArgumentError(kIntOverflow);
  return Value::Int(r);
}

}  // namespace

absl::StatusOr<Value> BinaryOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Concat(a, b);
  auto type_error = [&]() {
    return absl::InvalidArgumentError(absl::StrCat("unsupported operand type(s) for ", op, ": '",
                                                   a.TypeName(), "' and '", b.TypeName(), "'"));
  };
  if (op == "+" && a.is_string() && b.is_string()) return Concat(a, b);
  if (op == "+" && a.is_string() != b.is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "can only concatenate str (not \"", (a.is_string() ? b : a).TypeName(), "\") to str"));
  }
  if (op == "+" && a.is_list() && b.is_list() && a.kind() == b.kind()) {
    List items = a.list();
    items.insert(items.end(), b.list().begin(), b.list().end());
    return a.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(items))
                                           : Value::MakeList(std::move(items));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.kind() == Value::Kind::kInt)
    return BinaryOp(op, b, a);
  if (op == "*" && a.kind() == Value::Kind::kInt && (b.is_string() || b.is_list())) {
    // Bytes of a string, values of a list: bounded before anything is built.
    const int64_t each = b.is_string() ? static_cast<int64_t>(b.s().size()) : b.nodes();
    int64_t total = 0;
    if (__builtin_mul_overflow(a.i(), each, &total) ||
        total > (b.is_string() ? kMaxStringBytes : kMaxValueNodes)) {
      return absl::InvalidArgumentError("repetition result too large");
    }
    if (b.is_string()) {
      MarkedText s;
      for (int64_t k = 0; k < a.i(); ++k) s.Append(b);
      return s.ToValue();
    }
    List items;
    for (int64_t k = 0; k < a.i(); ++k) items.insert(items.end(), b.list().begin(), b.list().end());
    return Value::MakeList(std::move(items));
  }
  if (op == "%" && a.is_string()) {
    return absl::UnimplementedError("string formatting with '%' is not supported");
  }
  if (!a.is_number() || !b.is_number()) return type_error();
  const bool fl = a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat;
  if (op == "/") {
    if (b.f() == 0) return absl::InvalidArgumentError("division by zero");
    return Value::Float(a.f() / b.f());
  }
  if (!fl && (op == "+" || op == "-" || op == "*" || op == "**")) return IntOp(op, a.i(), b.i());
  if (op == "+") return Value::Float(a.f() + b.f());
  if (op == "-") return Value::Float(a.f() - b.f());
  if (op == "*") return Value::Float(a.f() * b.f());
  if (op == "**") return Value::Float(std::pow(a.f(), b.f()));
  if (b.f() == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
  // x // -1 is -x and x % -1 is 0; C++'s / and % on INT64_MIN and -1 are undefined.
  if (!fl && b.i() == -1) {
    if (op == "%") return Value::Int(0);
    if (op == "//" && a.i() == std::numeric_limits<int64_t>::min()) {
      return absl::InvalidArgumentError(kIntOverflow);  // the quotient is 2^63
    }
  }
  if (op == "//") {
    if (fl) return Value::Float(std::floor(a.f() / b.f()));
    int64_t q = a.i() / b.i();
    if ((a.i() % b.i() != 0) && ((a.i() < 0) != (b.i() < 0))) --q;
    return Value::Int(q);
  }
  if (op == "%") {
    if (fl) {
      double m = std::fmod(a.f(), b.f());
      if (m != 0 && ((m < 0) != (b.f() < 0))) m += b.f();
      return Value::Float(m);
    }
    int64_t m = a.i() % b.i();
    if (m != 0 && ((m < 0) != (b.i() < 0))) m += b.i();
    return Value::Int(m);
  }
  return type_error();
}

}  // namespace pinfer::jinja
