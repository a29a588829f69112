#include "server/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace pinfer::jinja {

Value Value::Undefined(std::string why) {
  Value v;
  v.s_ = std::move(why);
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::move(s);
  return v;
}
int Value::depth() const { return kind_ == Kind::kNamespace ? kNamespaceDepth : depth_; }

int64_t Value::nodes() const { return kind_ == Kind::kNamespace ? kNamespaceNodes : nodes_; }

void Value::Count(const Value& member) const {
  depth_ = std::max(depth_, member.depth() + 1);
  // Saturating: a value this large is refused long before the sum could overflow.
  nodes_ = std::min<int64_t>(nodes_ + member.nodes(), int64_t{1} << 62);
}

Value Value::String(std::string s, ContentSpans content) {
  Value v = String(std::move(s));
  std::sort(content.begin(), content.end());
  ContentSpans merged;
  for (auto [b, e] : content) {
    e = std::min(e, v.s_.size());
    if (b >= e) continue;
    if (!merged.empty() && b <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, e);
    } else {
      merged.push_back({b, e});
    }
  }
  if (!merged.empty()) v.content_ = std::make_shared<const ContentSpans>(std::move(merged));
  return v;
}
Value Value::Content(std::string s) {
  const size_t n = s.size();
  return String(std::move(s), ContentSpans{{0, n}});
}

const ContentSpans& Value::content() const {
  static const ContentSpans kNone;
  return content_ ? *content_ : kNone;
}

namespace {

bool HasContentAt(const Value& v, int depth) {
  if (v.is_string()) return !v.content().empty();
  if (depth > 32) return v.is_list() || v.is_mapping();
  if (v.is_list()) {
    for (const Value& x : v.list()) {
      if (HasContentAt(x, depth + 1)) return true;
    }
  } else if (v.is_mapping()) {
    for (const auto& [k, x] : v.dict()) {
      if (HasContentAt(k, depth + 1) || HasContentAt(x, depth + 1)) return true;
    }
  }
  return false;
}

}  // namespace

bool Value::HasContent() const { return HasContentAt(*this, 0); }

Value Value::MakeList(List items) {
  Value v;
  v.kind_ = Kind::kList;
  v.depth_ = 1;
  for (const Value& item : items) v.Count(item);
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::Tuple(List items) {
  Value v = MakeList(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}
Value Value::MakeDict(DictItems items) {
  Value v;
  v.kind_ = Kind::kDict;
  v.depth_ = 1;
  for (const auto& [key, value] : items) v.Count(key), v.Count(value);
  v.dict_ = std::make_shared<DictItems>(std::move(items));
  return v;
}
Value Value::Namespace(DictItems items) {
  Value v = MakeDict(std::move(items));
  v.kind_ = Kind::kNamespace;
  return v;
}
Value Value::Callable(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<NativeFn>(std::move(fn));
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& j, bool content) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return None();
    case nlohmann::json::value_t::boolean:
      return Bool(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Int(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return Int(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::json::value_t::number_float:
      return Float(j.get<double>());
    case nlohmann::json::value_t::string:
      return content ? Content(j.get<std::string>()) : String(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      for (const auto& e : j) items.push_back(FromJson(e, content));
      return MakeList(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      DictItems items;
      for (const auto& [k, e] : j.items()) {
        items.push_back({content ? Content(k) : String(k), FromJson(e, content)});
      }
      return MakeDict(std::move(items));
    }
    default:
      return None();
  }
}

Value* Value::Find(std::string_view key) const {
  if (!is_mapping()) return nullptr;
  for (auto& [k, v] : *dict_) {
    if (k.is_string() && k.s() == key) return &v;
  }
  return nullptr;
}

Value* Value::Find(const Value& key) const {
  if (!is_mapping()) return nullptr;
  for (auto& [k, v] : *dict_) {
    if (Equals(k, key)) return &v;
  }
  return nullptr;
}

void Value::Set(const Value& key, Value v) const {
  Count(key);  // a replaced member still counts: the figures only bound the value from above
  Count(v);
  if (Value* old = Find(key)) {
    *old = std::move(v);
  } else if (dict_) {
    dict_->push_back({key, std::move(v)});
  }
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kString:
      return !s_.empty();
    case Kind::kList:
    case Kind::kTuple:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->empty();
    default:
      return true;
  }
}

std::string FloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // "-1.2345e+17": shortest round-trip digits
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(e + 1));
  if (exp >= -4 && exp < 16) {  // Python's repr: positional between 1e-4 and 1e16
    std::string out;
    if (exp < 0) {
      out = "0." + std::string(-exp - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
    return sign + out;
  }
  std::string mant = digits.substr(0, 1);
  if (digits.size() > 1) mant += "." + digits.substr(1);
  const int a = std::abs(exp);
  return absl::StrCat(sign, mant, "e", exp < 0 ? "-" : "+", a < 10 ? "0" : "", a);
}

namespace {

void AppendCodePointEscape(unsigned c, std::string* out) {
  static const char* hex = "0123456789abcdef";
  out->append("\\x");
  out->push_back(hex[c >> 4]);
  out->push_back(hex[c & 15]);
}

std::string StringRepr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = s[i];
    if (c == '\\')
      out += "\\\\";
    else if (c == q)
      out += std::string("\\") + static_cast<char>(q);
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f)
      AppendCodePointEscape(c, &out);
    else if (c == 0xC2 && i + 1 < s.size() &&
             (static_cast<unsigned char>(s[i + 1]) < 0xA1 ||
              static_cast<unsigned char>(s[i + 1]) == 0xAD)) {
      AppendCodePointEscape(static_cast<unsigned char>(s[++i]), &out);  // C1, nbsp, soft hyphen
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back(q);
  return out;
}

void JsonString(const std::string& s, std::string* out) {
  static const char* hex = "0123456789abcdef";
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(hex[c >> 4]);
          out->push_back(hex[c & 15]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

struct JsonFormat {
  int indent;
  bool sort_keys;
  std::string item_sep, key_sep;
};

absl::Status AppendJson(const Value& v, const JsonFormat& f, int level, std::string* out);

absl::StatusOr<std::string> JsonKey(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString:
      return k.s();
    case Value::Kind::kInt:
      return std::to_string(k.i());
    case Value::Kind::kFloat:
      return FloatRepr(k.f());
    case Value::Kind::kBool:
      return std::string(k.b() ? "true" : "false");
    case Value::Kind::kNone:
      return std::string("null");
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tojson: keys must be str, int, float, bool or None, not ", k.TypeName()));
  }
}

void Newline(const JsonFormat& f, int level, std::string* out) {
  if (f.indent < 0) return;
  out->push_back('\n');
  out->append(static_cast<size_t>(f.indent) * level, ' ');
}

absl::Status AppendContainer(const Value& v, const JsonFormat& f, int level, std::string* out) {
  const bool is_list = v.is_list();
  const size_t n = is_list ? v.list().size() : v.dict().size();
  out->push_back(is_list ? '[' : '{');
  if (n == 0) {
    out->push_back(is_list ? ']' : '}');
    return absl::OkStatus();
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::vector<std::string> keys;
  if (!is_list) {
    for (const auto& [k, e] : v.dict()) {
      auto key = JsonKey(k);
      if (!key.ok()) return key.status();
      keys.push_back(*key);
    }
    if (f.sort_keys) {
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return keys[a] < keys[b]; });
    }
  }
  for (size_t j = 0; j < n; ++j) {
    if (j > 0) out->append(f.item_sep);
    Newline(f, level + 1, out);
    const size_t i = order[j];
    if (!is_list) {
      JsonString(keys[i], out);
      out->append(f.key_sep);
    }
    absl::Status st = AppendJson(is_list ? v.list()[i] : v.dict()[i].second, f, level + 1, out);
    if (!st.ok()) return st;
  }
  Newline(f, level, out);
  out->push_back(is_list ? ']' : '}');
  return absl::OkStatus();
}

absl::Status AppendJson(const Value& v, const JsonFormat& f, int level, std::string* out) {
  if (level > 512) return absl::InvalidArgumentError("tojson: value nested too deeply");
  switch (v.kind()) {
    case Value::Kind::kNone:
      out->append("null");
      return absl::OkStatus();
    case Value::Kind::kBool:
      out->append(v.b() ? "true" : "false");
      return absl::OkStatus();
    case Value::Kind::kInt:
      out->append(std::to_string(v.i()));
      return absl::OkStatus();
    case Value::Kind::kFloat: {
      const double d = v.f();
      out->append(std::isnan(d)   ? "NaN"
                  : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                                  : FloatRepr(d));
      return absl::OkStatus();
    }
    case Value::Kind::kString:
      JsonString(v.s(), out);
      return absl::OkStatus();
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kDict:
      return AppendContainer(v, f, level, out);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tojson: Object of type ", v.TypeName(), " is not JSON serializable"));
  }
}

}  // namespace

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return s_;
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return FloatRepr(f_);
    case Kind::kString:
      return StringRepr(s_);
    case Kind::kList:
    case Kind::kTuple: {
      const bool t = kind_ == Kind::kTuple;
      std::string out = t ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].Repr();
      }
      if (t && list_->size() == 1) out += ",";
      return out + (t ? ")" : "]");
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = "{";
      for (size_t i = 0; i < dict_->size(); ++i) {
        if (i) out += ", ";
        out += (*dict_)[i].first.Repr() + ": " + (*dict_)[i].second.Repr();
      }
      out += "}";
      return kind_ == Kind::kNamespace ? "<Namespace " + out + ">" : out;
    }
    case Kind::kCallable:
      return "<function " + s_ + ">";
  }
  return "";
}

absl::StatusOr<std::string> Value::ToJson(int indent, bool sort_keys, const std::string* item_sep,
                                          const std::string* key_sep) const {
  JsonFormat f{indent, sort_keys, item_sep ? *item_sep : (indent < 0 ? ", " : ","),
               key_sep ? *key_sep : ": "};
  std::string out;
  absl::Status st = AppendJson(*this, f, 0, &out);
  if (!st.ok()) return st;
  return out;
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
  }
  return "?";
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat) return a.f() == b.f();
    return a.i() == b.i();
  }
  if (a.is_list() && b.is_list()) {
    if (a.kind() != b.kind() || a.list().size() != b.list().size()) return false;
    for (size_t i = 0; i < a.list().size(); ++i) {
      if (!Equals(a.list()[i], b.list()[i])) return false;
    }
    return true;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.s() == b.s();
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict()) {
        const Value* o = b.Find(k);
        if (!o || !Equals(v, *o)) return false;
      }
      return true;
    }
    default:
      return &a.fn() == &b.fn();
  }
}

absl::StatusOr<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat) return a.f() < b.f();
    return a.i() < b.i();
  }
  if (a.is_string() && b.is_string()) return a.s() < b.s();  // UTF-8 keeps code point order
  if (a.is_list() && b.is_list()) {
    const size_t n = std::min(a.list().size(), b.list().size());
    for (size_t i = 0; i < n; ++i) {
      if (Equals(a.list()[i], b.list()[i])) continue;
      return Less(a.list()[i], b.list()[i]);
    }
    return a.list().size() < b.list().size();
  }
  return absl::InvalidArgumentError(absl::StrCat("'<' not supported between instances of '",
                                                 a.TypeName(), "' and '", b.TypeName(), "'"));
}

Value CallArgs::Get(size_t index, std::string_view name, Value fallback) const {
  if (index < positional.size()) return positional[index];
  for (const auto& [k, v] : keyword) {
    if (k == name) return v;
  }
  return fallback;
}

}  // namespace pinfer::jinja
