// Filters and tests. tojson is Hugging Face's (json.dumps with ensure_ascii=False, keys in
// insertion order unless sort_keys), not Jinja's HTML-safe one: it is what chat templates
// are written against.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "server/jinja/builtins.h"
#include "server/jinja/marks.h"
#include "server/jinja/utf8_text.h"

namespace pinfer::jinja {
namespace {

using Filter = absl::StatusOr<Value> (*)(const Value&, const CallArgs&);

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

absl::StatusOr<Value> Length(const Value& v, const CallArgs&) {
  if (v.is_string()) return Value::Int(static_cast<int64_t>(CodePointCount(v.s())));
  if (v.is_list()) return Value::Int(static_cast<int64_t>(v.list().size()));
  if (v.is_mapping()) return Value::Int(static_cast<int64_t>(v.dict().size()));
  if (v.is_undefined()) return Value::Int(0);
  return absl::InvalidArgumentError(
      absl::StrCat("object of type '", v.TypeName(), "' has no len()"));
}

absl::StatusOr<Value> Default(const Value& v, const CallArgs& a) {
  const bool boolean = a.Get(1, "boolean", Value::Bool(false)).Truthy();
  if (v.is_undefined() || (boolean && !v.Truthy()))
    return a.Get(0, "default_value", Value::String(""));
  return v;
}

absl::StatusOr<Value> ToJson(const Value& v, const CallArgs& a) {
  const Value indent = a.Get(1, "indent", Value::None());
  if (!indent.is_none() && (indent.i() < 0 || indent.i() > 64)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tojson: indent ", indent.i(), " is outside 0..64"));
  }
  const Value seps = a.Get(2, "separators", Value::None());
  std::string item_sep, key_sep;
  if (seps.is_list() && seps.list().size() == 2)
    item_sep = seps.list()[0].s(), key_sep = seps.list()[1].s();
  const bool has_seps = seps.is_list() && seps.list().size() == 2;
  auto s = v.ToJson(indent.is_none() ? -1 : static_cast<int>(indent.i()),
                    a.Get(3, "sort_keys", Value::Bool(false)).Truthy(),
                    has_seps ? &item_sep : nullptr, has_seps ? &key_sep : nullptr);
  if (!s.ok()) return s.status();
  return Value::String(*s);
}

absl::StatusOr<Value> Join(const Value& v, const CallArgs& a) {
  auto items = Iterate(v);
  if (!items.ok()) return items.status();
  const Value sep = a.Get(0, "d", Value::String(""));
  const Value attr = a.Get(1, "attribute", Value::None());
  MarkedText out;
  for (size_t i = 0; i < items->size(); ++i) {
    if (i) out.Append(sep);
    out.Append(attr.is_none() ? (*items)[i] : GetItem((*items)[i], attr));
    if (static_cast<int64_t>(out.size()) > kMaxStringBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("join: a string longer than ", kMaxStringBytes, " bytes"));
    }
  }
  return out.ToValue();
}

absl::StatusOr<Value> Trim(const Value& v, const CallArgs& a) {
  CallArgs m;
  if (!a.Get(0, "chars", Value::None()).is_none()) m.positional.push_back(a.Get(0, "chars"));
  return GetAttribute(v.is_string() ? v : Value::String(v.Str()), "strip").fn()(m);
}

absl::StatusOr<Value> Title(const Value& v, const CallArgs&) {
  std::string s = v.Str();
  bool start = true;
  for (char& c : s) {
    const bool sep = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '-' || c == '(' ||
                     c == '{' || c == '[' || c == '<';
    c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c))
                                : std::tolower(static_cast<unsigned char>(c)));
    start = sep;
  }
  return Value::String(s);
}

absl::StatusOr<Value> Capitalize(const Value& v, const CallArgs&) {
  std::string s = Lower(v.Str());
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return Value::String(s);
}

absl::StatusOr<Value> Items(const Value& v, const CallArgs&) {
  if (v.is_undefined()) return Value::MakeList();
  if (!v.is_mapping())
    return absl::InvalidArgumentError(
        absl::StrCat("items: expected a mapping, got ", v.TypeName()));
  List out;
  for (const auto& [k, x] : v.dict()) out.push_back(Value::Tuple({k, x}));
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> ToList(const Value& v, const CallArgs&) {
  auto items = Iterate(v);
  if (!items.ok()) return items.status();
  return Value::MakeList(std::move(*items));
}

absl::StatusOr<Value> FirstLast(const Value& v, bool first) {
  auto items = Iterate(v);
  if (!items.ok()) return items.status();
  if (items->empty()) return Value::Undefined("no first/last item of an empty sequence");
  return first ? items->front() : items->back();
}

absl::StatusOr<Value> Replace(const Value& v, const CallArgs& a) {
  CallArgs m = a;
  return GetAttribute(Value::String(v.Str()), "replace").fn()(m);
}

absl::StatusOr<Value> Indent(const Value& v, const CallArgs& a) {
  const Value width = a.Get(0, "width", Value::Int(4));
  if (!width.is_string() && width.i() > kMaxStringBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("indent: width ", width.i(), " is too large"));
  }
  const std::string pad =
      width.is_string() ? width.s()
                        : std::string(static_cast<size_t>(std::max<int64_t>(0, width.i())), ' ');
  const bool first = a.Get(1, "first", Value::Bool(false)).Truthy();
  const bool blank = a.Get(2, "blank", Value::Bool(false)).Truthy();
  const std::string s = v.Str();
  std::string out;
  size_t i = 0;
  bool line0 = true;
  while (true) {
    size_t j = s.find('\n', i);
    const std::string line = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if ((line0 ? first : true) && (blank || !line.empty())) out += pad;
    out += line;
    if (static_cast<int64_t>(out.size()) > kMaxStringBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("indent: a string longer than ", kMaxStringBytes, " bytes"));
    }
    if (j == std::string::npos) break;
    out += '\n';
    i = j + 1;
    line0 = false;
  }
  return Value::String(out);
}

// A float truncated to an integer, or an error when it has no 64-bit integer value.
absl::StatusOr<Value> Truncate(double d) {
  if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0)) {  // NaN fails too
    return absl::InvalidArgumentError(
        absl::StrCat("int: ", d, " has no 64-bit integer value (the range is +-2^63)"));
  }
  return Value::Int(static_cast<int64_t>(d));
}

absl::StatusOr<Value> ToInt(const Value& v, const CallArgs& a) {
  if (v.kind() == Value::Kind::kFloat) return Truncate(v.f());
  if (v.is_number()) return Value::Int(v.i());
  if (v.is_string()) {
    try {
      size_t used = 0;
      const std::string s = v.s();
      const double d = std::stod(s, &used);
      if (used == s.size()) return Truncate(d);
    } catch (const std::exception&) {
    }
  }
  return a.Get(0, "default", Value::Int(0));
}

absl::StatusOr<Value> ToFloat(const Value& v, const CallArgs& a) {
  if (v.is_number()) return Value::Float(v.f());
  if (v.is_string()) {
    try {
      size_t used = 0;
      const double d = std::stod(v.s(), &used);
      if (used == v.s().size()) return Value::Float(d);
    } catch (const std::exception&) {
    }
  }
  return a.Get(0, "default", Value::Float(0));
}

absl::StatusOr<Value> Round(const Value& v, const CallArgs& a) {
  if (!v.is_number()) return absl::InvalidArgumentError("round: not a number");
  const int64_t prec = a.Get(0, "precision", Value::Int(0)).i();
  const std::string method = a.Get(1, "method", Value::String("common")).Str();
  if (method == "common" && v.kind() != Value::Kind::kFloat)
    return Value::Int(v.i());  // round(int)
  const double scale = std::pow(10.0, static_cast<double>(prec));
  double x = v.f() * scale;
  // "common" is Python's round(): halves to even.
  x = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::nearbyint(x);
  return Value::Float(x / scale);
}

// sort/dictsort keys: strings compare case-insensitively unless case_sensitive.
Value SortKey(const Value& v, bool case_sensitive) {
  return v.is_string() && !case_sensitive ? Value::String(Lower(v.s())) : v;
}

absl::StatusOr<Value> Sort(const Value& v, const CallArgs& a) {
  auto items = Iterate(v);
  if (!items.ok()) return items.status();
  const bool reverse = a.Get(0, "reverse", Value::Bool(false)).Truthy();
  const bool cs = a.Get(1, "case_sensitive", Value::Bool(false)).Truthy();
  const Value attr = a.Get(2, "attribute", Value::None());
  absl::Status err;
  auto key = [&](const Value& x) { return SortKey(attr.is_none() ? x : GetItem(x, attr), cs); };
  std::stable_sort(items->begin(), items->end(), [&](const Value& x, const Value& y) {
    auto l = reverse ? Less(key(y), key(x)) : Less(key(x), key(y));
    if (!l.ok()) err = l.status();
    return l.ok() && *l;
  });
  if (!err.ok()) return err;
  return Value::MakeList(std::move(*items));
}

absl::StatusOr<Value> DictSort(const Value& v, const CallArgs& a) {
  auto items = Items(v, a);
  if (!items.ok()) return items;
  const bool cs = a.Get(0, "case_sensitive", Value::Bool(false)).Truthy();
  const bool by_value = a.Get(1, "by", Value::String("key")).Str() == "value";
  const bool reverse = a.Get(2, "reverse", Value::Bool(false)).Truthy();
  List list = items->list();
  std::stable_sort(list.begin(), list.end(), [&](const Value& x, const Value& y) {
    const Value& kx = x.list()[by_value ? 1 : 0];
    const Value& ky = y.list()[by_value ? 1 : 0];
    auto r =
        reverse ? Less(SortKey(ky, cs), SortKey(kx, cs)) : Less(SortKey(kx, cs), SortKey(ky, cs));
    return r.ok() && *r;
  });
  return Value::MakeList(std::move(list));
}

absl::StatusOr<Value> MinMax(const Value& v, const CallArgs& a, bool max) {
  auto items = Iterate(v);
  if (!items.ok()) return items.status();
  if (items->empty()) return Value::Undefined("min/max of an empty sequence");
  const bool cs = a.Get(0, "case_sensitive", Value::Bool(false)).Truthy();
  Value best = (*items)[0];
  for (const Value& x : *items) {
    auto l =
        max ? Less(SortKey(best, cs), SortKey(x, cs)) : Less(SortKey(x, cs), SortKey(best, cs));
    if (!l.ok()) return l.status();
    if (*l) best = x;
  }
  return best;
}

absl::StatusOr<Value> Sum(const Value& v, const CallArgs& a) {
  auto items = Iterate(v);
  if (!items.ok()) return items.status();
  const Value attr = a.Get(0, "attribute", Value::None());
  Value total = a.Get(1, "start", Value::Int(0));
  for (const Value& x : *items) {
    auto t = BinaryOp("+", total, attr.is_none() ? x : GetItem(x, attr));
    if (!t.ok()) return t;
    total = *t;
  }
  return total;
}

absl::StatusOr<Value> Unique(const Value& v, const CallArgs& a) {
  auto items = Iterate(v);
  if (!items.ok()) return items.status();
  const bool cs = a.Get(0, "case_sensitive", Value::Bool(false)).Truthy();
  List out;
  for (const Value& x : *items) {
    bool seen = false;
    for (const Value& y : out) seen |= Equals(SortKey(x, cs), SortKey(y, cs));
    if (!seen) out.push_back(x);
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> Reverse(const Value& v, const CallArgs&) {
  if (v.is_string()) {
    std::vector<std::string> c = SplitCodePoints(v.s());
    std::string out;
    for (auto it = c.rbegin(); it != c.rend(); ++it) out += *it;
    return Value::String(out);
  }
  auto items = Iterate(v);
  if (!items.ok()) return items.status();
  std::reverse(items->begin(), items->end());
  return Value::MakeList(std::move(*items));
}

absl::StatusOr<Value> Escape(const Value& v, const CallArgs&) {
  std::string out;
  for (char c : v.Str()) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::String(out);
}

// select/reject(test, args...), selectattr/rejectattr(attr, [test, args...]).
absl::StatusOr<Value> SelectLike(const Value& v, const CallArgs& a, bool keep, bool by_attr) {
  auto items = Iterate(v);
  if (!items.ok()) return items.status();
  const size_t test_at = by_attr ? 1 : 0;
  const Value attr = by_attr ? a.Get(0, "attribute") : Value();
  const bool has_test = a.positional.size() > test_at;
  const std::string test = has_test ? a.positional[test_at].Str() : "";
  if (has_test && !IsKnownTest(test))
    return absl::UnimplementedError(absl::StrCat("test '", test, "' is not supported"));
  CallArgs targs;
  for (size_t i = test_at + 1; i < a.positional.size(); ++i)
    targs.positional.push_back(a.positional[i]);
  List out;
  for (const Value& x : *items) {
    const Value subject = by_attr ? GetItem(x, attr) : x;
    bool pass = subject.Truthy();
    if (has_test) {
      auto t = ApplyTest(test, subject, targs);
      if (!t.ok()) return t.status();
      pass = *t;
    }
    if (pass == keep) out.push_back(x);
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> Map(const Value& v, const CallArgs& a) {
  auto items = Iterate(v);
  if (!items.ok()) return items.status();
  const Value attr = a.Get(99, "attribute", Value::None());
  List out;
  if (!attr.is_none()) {
    const Value dflt = a.Get(99, "default", Value());
    for (const Value& x : *items) {
      Value r = GetItem(x, attr);
      out.push_back(r.is_undefined() && !dflt.is_undefined() ? dflt : r);
    }
    return Value::MakeList(std::move(out));
  }
  if (a.positional.empty())
    return absl::InvalidArgumentError("map needs a filter name or attribute=");
  const std::string f = a.positional[0].Str();
  if (!IsKnownFilter(f))
    return absl::UnimplementedError(absl::StrCat("filter '", f, "' is not supported"));
  CallArgs fargs;
  fargs.positional.assign(a.positional.begin() + 1, a.positional.end());
  fargs.keyword = a.keyword;
  for (const Value& x : *items) {
    auto r = ApplyFilter(f, x, fargs);
    if (!r.ok()) return r;
    out.push_back(*r);
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> Wordcount(const Value& v, const CallArgs&) {
  CallArgs none;
  auto parts = GetAttribute(Value::String(v.Str()), "split").fn()(none);
  if (!parts.ok()) return parts;
  return Value::Int(static_cast<int64_t>(parts->list().size()));
}

const std::vector<std::pair<std::string, Filter>>& Filters() {
  static const std::vector<std::pair<std::string, Filter>> f = {
      {"length", Length},
      {"count", Length},
      {"default", Default},
      {"d", Default},
      {"tojson", ToJson},
      {"join", Join},
      {"trim", Trim},
      {"title", Title},
      {"capitalize", Capitalize},
      {"items", Items},
      {"list", ToList},
      {"replace", Replace},
      {"indent", Indent},
      {"int", ToInt},
      {"float", ToFloat},
      {"round", Round},
      {"sort", Sort},
      {"dictsort", DictSort},
      {"sum", Sum},
      {"unique", Unique},
      {"reverse", Reverse},
      {"escape", Escape},
      {"e", Escape},
      {"map", Map},
      {"wordcount", Wordcount},
      {"upper",
       [](const Value& v, const CallArgs&) -> absl::StatusOr<Value> {
         return Value::String(Upper(v.Str()));
       }},
      {"lower",
       [](const Value& v, const CallArgs&) -> absl::StatusOr<Value> {
         return Value::String(Lower(v.Str()));
       }},
      {"string",
       [](const Value& v, const CallArgs&) -> absl::StatusOr<Value> {
         return Value::String(v.Str());
       }},
      {"safe", [](const Value& v, const CallArgs&) -> absl::StatusOr<Value> { return v; }},
      {"first", [](const Value& v, const CallArgs&) { return FirstLast(v, true); }},
      {"last", [](const Value& v, const CallArgs&) { return FirstLast(v, false); }},
      {"min", [](const Value& v, const CallArgs& a) { return MinMax(v, a, false); }},
      {"max", [](const Value& v, const CallArgs& a) { return MinMax(v, a, true); }},
      {"abs",
       [](const Value& v, const CallArgs&) -> absl::StatusOr<Value> {
         if (!v.is_number()) return absl::InvalidArgumentError("abs: not a number");
         if (v.kind() == Value::Kind::kFloat) return Value::Float(std::fabs(v.f()));
         if (v.i() == std::numeric_limits<int64_t>::min())
           return absl::InvalidArgumentError("abs: integer overflow (|-2^63| needs 64 bits)");
         return Value::Int(std::llabs(v.i()));
       }},
      {"select", [](const Value& v, const CallArgs& a) { return SelectLike(v, a, true, false); }},
      {"reject", [](const Value& v, const CallArgs& a) { return SelectLike(v, a, false, false); }},
      {"selectattr",
       [](const Value& v, const CallArgs& a) { return SelectLike(v, a, true, true); }},
      {"rejectattr",
       [](const Value& v, const CallArgs& a) { return SelectLike(v, a, false, true); }},
  };
  return f;
}

const std::set<std::string>& Tests() {
  static const std::set<std::string> t = {
      "defined", "undefined", "none",        "boolean", "false",    "true",     "integer",
      "float",   "number",    "string",      "mapping", "iterable", "sequence", "callable",
      "odd",     "even",      "divisibleby", "eq",      "equalto",  "==",       "ne",
      "!=",      "lt",        "<",           "gt",      ">",        "le",       "<=",
      "ge",      ">=",        "in",          "sameas",  "lower",    "upper"};
  return t;
}

}  // namespace

bool IsKnownFilter(std::string_view name) {
  for (const auto& [n, f] : Filters()) {
    if (n == name) return true;
  }
  return false;
}

bool IsKnownTest(std::string_view name) { return Tests().count(std::string(name)) > 0; }

absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& v, const CallArgs& args) {
  for (const auto& [n, f] : Filters()) {
    if (n != name) continue;
    if (n == "join" || n == "trim") return f(v, args);  // their content spans are exact
    return Derived(f(v, args), {&v}, &args);
  }
  return absl::UnimplementedError(absl::StrCat("filter '", name, "' is not supported"));
}

absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& v, const CallArgs& a) {
  const Value arg = a.Get(0, "other");
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "false") return v.kind() == K::kBool && !v.b();
  if (name == "true") return v.kind() == K::kBool && v.b();
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "float") return v.kind() == K::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.kind() == K::kDict;
  if (name == "iterable")
    return v.is_list() || v.is_string() || v.kind() == K::kDict || v.is_undefined();
  if (name == "sequence") return v.is_list() || v.is_string() || v.kind() == K::kDict;
  if (name == "callable") return v.is_callable();
  if (name == "lower") return v.is_string() && Lower(v.s()) == v.s();
  if (name == "upper") return v.is_string() && Upper(v.s()) == v.s();
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.kind() != K::kInt)
      return absl::InvalidArgumentError(absl::StrCat("test '", name, "' needs an integer"));
    if (name == "divisibleby") return arg.i() == -1 || (arg.i() != 0 && v.i() % arg.i() == 0);
    return (v.i() % 2 != 0) == (name == "odd");
  }
  if (name == "eq" || name == "equalto" || name == "==") return Equals(v, arg);
  if (name == "ne" || name == "!=") return !Equals(v, arg);
  if (name == "sameas") return Equals(v, arg) && v.kind() == arg.kind();
  if (name == "in") {
    if (arg.is_string() && v.is_string()) return arg.s().find(v.s()) != std::string::npos;
    auto items = Iterate(arg);
    if (!items.ok()) return items.status();
    for (const Value& x : *items) {
      if (Equals(x, v)) return true;
    }
    return false;
  }
  absl::StatusOr<bool> lt =
      name == "lt" || name == "<" || name == "ge" || name == ">=" ? Less(v, arg) : Less(arg, v);
  if (!lt.ok()) return lt;
  if (name == "lt" || name == "<" || name == "gt" || name == ">") return *lt;
  return !*lt;
}

}  // namespace pinfer::jinja
