#include "server/jinja/marks.h"

#include <algorithm>

namespace pinfer::jinja {

void MarkedText::Append(std::string_view text, bool content) {
  if (text.empty()) return;
  const size_t at = text_.size();
  text_.append(text);
  if (!content) return;
  if (!content_.empty() && content_.back().second == at) {
    content_.back().second = text_.size();
  } else {
    content_.push_back({at, text_.size()});
  }
}

void MarkedText::Append(const Value& v) {
  if (!v.is_string()) return Append(v.Str(), v.HasContent());
  const std::string& s = v.s();
  size_t from = 0;
  for (const auto& [b, e] : v.content()) {
    Append(std::string_view(s).substr(from, b - from), false);
    Append(std::string_view(s).substr(b, e - b), true);
    from = e;
  }
  Append(std::string_view(s).substr(from), false);
}

Value Concat(const Value& a, const Value& b) {
  MarkedText m;
  m.Append(a);
  m.Append(b);
  return m.ToValue();
}

Value Substring(const Value& s, size_t at, size_t len) {
  at = std::min(at, s.s().size());
  len = std::min(len, s.s().size() - at);
  ContentSpans spans;
  for (const auto& [b, e] : s.content()) {
    const size_t lo = std::max(b, at), hi = std::min(e, at + len);
    if (lo < hi) spans.push_back({lo - at, hi - at});
  }
  return Value::String(s.s().substr(at, len), std::move(spans));
}

namespace {

Value AllContent(const Value& v) {
  if (v.is_string()) return v.content().empty() ? Value::Content(v.s()) : v;
  if (!v.is_list()) return v;
  List items;
  for (const Value& x : v.list()) {
    items.push_back(x.is_string() && x.content().empty() ? Value::Content(x.s()) : x);
  }
  return v.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(items))
                                         : Value::MakeList(std::move(items));
}

}  // namespace

absl::StatusOr<Value> Derived(absl::StatusOr<Value> result,
                              std::initializer_list<const Value*> inputs, const CallArgs* args) {
  if (!result.ok()) return result;
  bool content = false;
  for (const Value* v : inputs) content = content || v->HasContent();
  if (args != nullptr) {
    for (const Value& v : args->positional) content = content || v.HasContent();
    for (const auto& [k, v] : args->keyword) content = content || v.HasContent();
  }
  if (!content) return result;
  return AllContent(*result);
}

}  // namespace pinfer::jinja
