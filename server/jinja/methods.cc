// Attribute and item access, iteration, the str and dict methods templates call, and the
// global functions.
#include <ctime>
#include <set>

#include "absl/strings/str_cat.h"
#include "server/jinja/builtins.h"
#include "server/jinja/marks.h"
#include "server/jinja/utf8_text.h"

namespace pinfer::jinja {
namespace {

bool IsPySpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string Strip(const std::string& s, const Value& chars, bool left, bool right) {
  auto strip_this = [&](char c) {
    return chars.is_string() ? chars.s().find(c) != std::string::npos : IsPySpace(c);
  };
  size_t b = 0, e = s.size();
  while (left && b < e && strip_this(s[b])) ++b;
  while (right && e > b && strip_this(s[e - 1])) --e;
  return s.substr(b, e - b);
}

absl::StatusOr<Value> Split(const std::string& s, const Value& sep, int64_t maxsplit) {
  List parts;
  if (!sep.is_string()) {  // runs of whitespace, ends stripped
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && IsPySpace(s[i])) ++i;
      if (i >= s.size()) break;
      size_t j = i;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        j = s.size();
        while (j > i && IsPySpace(s[j - 1])) --j;
      } else {
        while (j < s.size() && !IsPySpace(s[j])) ++j;
      }
      parts.push_back(Value::String(s.substr(i, j - i)));
      i = j;
    }
    return Value::MakeList(std::move(parts));
  }
  if (sep.s().empty()) return absl::InvalidArgumentError("empty separator");
  size_t i = 0;
  while (true) {
    const size_t j = (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)
                         ? std::string::npos
                         : s.find(sep.s(), i);
    if (j == std::string::npos) {
      parts.push_back(Value::String(s.substr(i)));
      return Value::MakeList(std::move(parts));
    }
    parts.push_back(Value::String(s.substr(i, j - i)));
    i = j + sep.s().size();
  }
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
  if (from.empty()) return s;
  std::string out;
  size_t i = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t j = s.find(from, i);
    // Past kMaxStringBytes the rest is left as it is: the result is refused as too long.
    if (j == std::string::npos || static_cast<int64_t>(out.size()) > kMaxStringBytes) break;
    out += s.substr(i, j - i) + to;
    i = j + from.size();
  }
  return out + s.substr(i);
}

bool AffixTest(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string() || a.s().size() > s.size()) return false;
    return prefix ? s.compare(0, a.s().size(), a.s()) == 0
                  : s.compare(s.size() - a.s().size(), a.s().size(), a.s()) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.list()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

bool AllChars(const std::string& s, int (*pred)(int)) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (c >= 0x80 || !pred(c)) return false;
  }
  return true;
}

absl::StatusOr<Value> StrMethod(const std::string& s, const std::string& m, CallArgs& a) {
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    return Value::String(Strip(s, a.Get(0, "chars"), m != "rstrip", m != "lstrip"));
  }
  if (m == "upper" || m == "lower") {
    std::string r = s;
    for (char& c : r)
      c = static_cast<char>(m == "upper" ? std::toupper(static_cast<unsigned char>(c))
                                         : std::tolower(static_cast<unsigned char>(c)));
    return Value::String(r);
  }
  if (m == "capitalize" || m == "title") return ApplyFilter(m, Value::String(s), a);
  if (m == "startswith" || m == "endswith")
    return Value::Bool(AffixTest(s, a.Get(0, "prefix"), m == "startswith"));
  if (m == "split") {
    Value maxsplit = a.Get(1, "maxsplit", Value::Int(-1));
    return Split(s, a.Get(0, "sep"), maxsplit.i());
  }
  if (m == "replace")
    return Value::String(Replace(s, a.Get(0, "old").s(), a.Get(1, "new").s(),
                                 a.Get(2, "count", Value::Int(-1)).i()));
  if (m == "find") {
    const size_t at = s.find(a.Get(0, "sub").s());
    return Value::Int(
        at == std::string::npos ? -1 : static_cast<int64_t>(CodePointCount(s.substr(0, at))));
  }
  if (m == "count") {
    const std::string sub = a.Get(0, "sub").s();
    int64_t n = 0;
    if (sub.empty()) return Value::Int(static_cast<int64_t>(CodePointCount(s)) + 1);
    for (size_t i = s.find(sub); i != std::string::npos; i = s.find(sub, i + sub.size())) ++n;
    return Value::Int(n);
  }
  if (m == "join") {
    auto items = Iterate(a.Get(0, "iterable"));
    if (!items.ok()) return items.status();
    std::string out;
    for (size_t i = 0; i < items->size(); ++i) {
      if (!(*items)[i].is_string())
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence item ", i, ": expected str instance, ", (*items)[i].TypeName(), " found"));
      if (i) out += s;
      out += (*items)[i].s();
      if (static_cast<int64_t>(out.size()) > kMaxStringBytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat("str.join(): a string longer than ", kMaxStringBytes, " bytes"));
      }
    }
    return Value::String(out);
  }
  if (m == "removeprefix" || m == "removesuffix") {
    const Value x = a.Get(0, "affix");
    if (!x.is_string() || !AffixTest(s, x, m == "removeprefix")) return Value::String(s);
    return Value::String(m == "removeprefix" ? s.substr(x.s().size())
                                             : s.substr(0, s.size() - x.s().size()));
  }
  if (m == "isdigit") return Value::Bool(AllChars(s, isdigit));
  if (m == "isalpha") return Value::Bool(AllChars(s, isalpha));
  if (m == "isalnum") return Value::Bool(AllChars(s, isalnum));
  if (m == "isspace") return Value::Bool(AllChars(s, isspace));
  if (m == "splitlines") {
    List lines;
    size_t i = 0;
    while (i < s.size()) {
      size_t j = s.find('\n', i);
      if (j == std::string::npos) j = s.size();
      lines.push_back(Value::String(s.substr(i, j - i)));
      i = j + 1;
    }
    return Value::MakeList(std::move(lines));
  }
  return absl::UnimplementedError(absl::StrCat("str method '", m, "' is not supported"));
}

// StrMethod on a string value, with content spans (marks.h): the strip family and join
// exactly, the rest as Derived.
absl::StatusOr<Value> MarkedStrMethod(const Value& obj, const std::string& m, CallArgs& a) {
  auto r = StrMethod(obj.s(), m, a);
  if (!r.ok() || !r->is_string()) return Derived(std::move(r), {&obj}, &a);
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    // What is left starts with a character the strip keeps, so its first occurrence is it.
    return Substring(obj, obj.s().find(r->s()), r->s().size());
  }
  if (m == "join") {
    auto items = Iterate(a.Get(0, "iterable"));
    if (!items.ok()) return items.status();
    MarkedText out;
    for (size_t i = 0; i < items->size(); ++i) {
      if (i) out.Append(obj);
      out.Append((*items)[i]);
    }
    return out.ToValue();
  }
  return Derived(std::move(r), {&obj}, &a);
}

absl::StatusOr<Value> DictMethod(const Value& d, const std::string& m, CallArgs& a) {
  if (m == "get") {
    const Value* v = d.Find(a.Get(0, "key"));
    return v ? *v : a.Get(1, "default", Value::None());
  }
  List out;
  for (const auto& [k, v] : d.dict()) {
    if (m == "items")
      out.push_back(Value::Tuple({k, v}));
    else if (m == "keys")
      out.push_back(k);
    else
      out.push_back(v);
  }
  return Value::MakeList(std::move(out));
}

const std::set<std::string> kStrMethods = {
    "strip",        "lstrip",       "rstrip",   "upper",   "lower",   "capitalize", "title",
    "startswith",   "endswith",     "split",    "replace", "find",    "count",      "join",
    "removeprefix", "removesuffix", "isdigit",  "isalpha", "isalnum", "isspace",    "splitlines",
    "format",       "rsplit",       "zfill",    "center",  "ljust",   "rjust",      "partition",
    "index",        "encode",       "casefold", "swapcase"};
const std::set<std::string> kDictMethods = {"get", "items", "keys", "values"};
const std::set<std::string> kMutators = {"append",  "extend", "insert", "pop",
                                         "remove",  "clear",  "update", "setdefault",
                                         "popitem", "sort",   "reverse"};

}  // namespace

List Characters(const Value& s) {
  List chars;
  size_t at = 0;
  for (const std::string& c : SplitCodePoints(s.s())) {
    chars.push_back(Substring(s, at, c.size()));
    at += c.size();
  }
  return chars;
}

Value GetAttribute(const Value& obj, const std::string& name) {
  if (obj.is_string() && kStrMethods.count(name)) {
    return Value::Callable("str." + name,
                           [obj, name](CallArgs& a) { return MarkedStrMethod(obj, name, a); });
  }
  if (obj.kind() == Value::Kind::kDict && kDictMethods.count(name)) {
    return Value::Callable("dict." + name,
                           [obj, name](CallArgs& a) { return DictMethod(obj, name, a); });
  }
  if ((obj.is_list() || obj.kind() == Value::Kind::kDict) && kMutators.count(name)) {
    return Value::Callable(name, [name, obj](CallArgs&) -> absl::StatusOr<Value> {
      return absl::InvalidArgumentError(
          absl::StrCat("access to attribute '", name, "' of '", obj.TypeName(),
                       "' object is unsafe (chat templates run in an immutable sandbox)"));
    });
  }
  if (obj.is_mapping()) {
    if (const Value* v = obj.Find(name)) return *v;
  }
  return Value::Undefined(
      absl::StrCat("'", obj.TypeName(), " object' has no attribute '", name, "'"));
}

Value GetItem(const Value& obj, const Value& key) {
  if ((obj.is_list() || obj.is_string()) &&
      (key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool)) {
    if (obj.is_string()) {
      const List chars = Characters(obj);
      int64_t i = key.i() < 0 ? key.i() + static_cast<int64_t>(chars.size()) : key.i();
      if (i >= 0 && i < static_cast<int64_t>(chars.size())) return chars[i];
    } else {
      int64_t i = key.i() < 0 ? key.i() + static_cast<int64_t>(obj.list().size()) : key.i();
      if (i >= 0 && i < static_cast<int64_t>(obj.list().size())) return obj.list()[i];
    }
    return Value::Undefined(absl::StrCat("index ", key.i(), " out of range of a ", obj.TypeName()));
  }
  if (obj.is_mapping()) {
    if (const Value* v = obj.Find(key)) return *v;
  }
  if (key.is_string()) return GetAttribute(obj, key.s());
  return Value::Undefined(absl::StrCat("'", obj.TypeName(), " object' has no item ", key.Repr()));
}

absl::StatusOr<List> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return List{};
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return v.list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& [k, x] : v.dict()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString:
      if (static_cast<int64_t>(CodePointCount(v.s())) > kMaxValueNodes) {
        return absl::ResourceExhaustedError(
            absl::StrCat("iterating over a string of more than ", kMaxValueNodes, " characters"));
      }
      return Characters(v);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("'", v.TypeName(), "' object is not iterable"));
  }
}

Value GlobalFunctions(std::time_t now) {
  DictItems g;
  g.push_back(
      {Value::String("range"), Value::Callable("range", [](CallArgs& a) -> absl::StatusOr<Value> {
         int64_t start = 0, stop = 0, step = 1;
         if (a.positional.size() == 1) stop = a.positional[0].i();
         if (a.positional.size() >= 2) start = a.positional[0].i(), stop = a.positional[1].i();
         if (a.positional.size() >= 3) step = a.positional[2].i();
         if (a.positional.empty() || step == 0)
           return absl::InvalidArgumentError("range() needs 1-3 integers, step not 0");
         List out;
         for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
           if (out.size() >= (1 << 20))
             return absl::InvalidArgumentError("range() longer than 1048576 items");
           out.push_back(Value::Int(i));
           if (__builtin_add_overflow(i, step, &i)) break;  // past the end: no more items
         }
         return Value::MakeList(std::move(out));
       })});
  auto from_kwargs = [](CallArgs& a, bool ns) -> absl::StatusOr<Value> {
    DictItems items;
    if (!a.positional.empty() && a.positional[0].is_mapping()) items = a.positional[0].dict();
    for (const auto& [k, v] : a.keyword) items.push_back({Value::String(k), v});
    if (ns) {  // what a namespace may hold, as for {% set ns.x = ... %} (renderer.cc)
      int64_t nodes = 1;
      for (const auto& [k, v] : items) {
        nodes += v.nodes();
        if (v.depth() >= kNamespaceDepth || nodes > kNamespaceNodes) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "namespace(): a namespace cannot hold a namespace, or a value nested deeper than ",
              kNamespaceDepth - 1, " or of more than ", kNamespaceNodes, " values"));
        }
      }
      return Value::Namespace(std::move(items));
    }
    return Value::MakeDict(std::move(items));
  };
  g.push_back({Value::String("namespace"), Value::Callable("namespace", [from_kwargs](CallArgs& a) {
                 return from_kwargs(a, true);
               })});
  g.push_back({Value::String("dict"), Value::Callable("dict", [from_kwargs](CallArgs& a) {
                 return from_kwargs(a, false);
               })});
  g.push_back({Value::String("raise_exception"),
               Value::Callable("raise_exception", [](CallArgs& a) -> absl::StatusOr<Value> {
                 return absl::FailedPreconditionError(
                     absl::StrCat(kRaisedPrefix, a.Get(0, "message").Str()));
               })});
  g.push_back({Value::String("strftime_now"),
               Value::Callable("strftime_now", [now](CallArgs& a) -> absl::StatusOr<Value> {
                 std::tm tm{};
                 localtime_r(&now, &tm);
                 char buf[256];
                 const size_t n =
                     std::strftime(buf, sizeof buf, a.Get(0, "format").Str().c_str(), &tm);
                 return Value::String(std::string(buf, n));
               })});
  return Value::MakeDict(std::move(g));
}

}  // namespace pinfer::jinja
