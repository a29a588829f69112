// Values of the Jinja-subset interpreter (server/jinja/template.h), with Python's semantics
// where templates can see them: str() and repr() text, truthiness, ==, <, and json.dumps as
// Hugging Face's chat-template `tojson` calls it (ensure_ascii off, keys in insertion order).
// Lists, dicts and namespaces are shared by reference, as in Python.
//
// A string also carries its content spans: the bytes that came from the caller's data
// (messages, tools) rather than from the template's own text (server/jinja/marks.h says how
// they follow the text through the template). Templates cannot see them: ==, <, hashing and
// every method ignore them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace pinfer::jinja {

// What a namespace may hold (its attributes' depth and size: the renderer refuses more, and
// so a namespace never holds a namespace), and what it counts for in its holders' figures.
inline constexpr int kNamespaceDepth = 32;
inline constexpr int64_t kNamespaceNodes = 1 << 16;
// The most any value made while rendering may be: nesting, values in a tree, bytes in a
// string. Beyond them the render fails (ResourceExhausted) instead of exhausting the stack,
// the memory or the time of the server.
inline constexpr int kMaxValueDepth = 128;
inline constexpr int64_t kMaxValueNodes = 1 << 20;
inline constexpr int64_t kMaxStringBytes = 16 << 20;

class Value;
struct CallArgs;
using List = std::vector<Value>;
// Insertion-ordered (keys are usually strings; lookups are linear: chat dicts are small).
using DictItems = std::vector<std::pair<Value, Value>>;
using NativeFn = std::function<absl::StatusOr<Value>(CallArgs&)>;
// Byte ranges [first, second) of a string: sorted, disjoint, none empty, none touching.
using ContentSpans = std::vector<std::pair<size_t, size_t>>;

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kNamespace,
    kCallable
  };

  Value() = default;                        // undefined
  static Value Undefined(std::string why);  // why: "'x' is undefined" for errors
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  // s with its content spans (normalised: sorted, merged, clipped to s).
  static Value String(std::string s, ContentSpans content);
  static Value Content(std::string s);  // all of s is content
  static Value MakeList(List items = {});
  static Value Tuple(List items);
  static Value MakeDict(DictItems items = {});
  static Value Namespace(DictItems items = {});
  static Value Callable(std::string name, NativeFn fn);
  // content: every string in it (dict keys too) is content.
  static Value FromJson(const nlohmann::ordered_json& j, bool content = false);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_list() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_mapping() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  // How deep and how large the value is, counted when a list, tuple or dict is built (they are
  // never changed after: the sandbox has no mutators). A namespace, whose attributes change,
  // counts as the most its attributes may hold (kNamespaceDepth, kNamespaceNodes), so these
  // figures bound every walk over the value (printing, tojson, ==, destruction).
  int depth() const;      // 0 for a scalar; 1 + the deepest member for a container
  int64_t nodes() const;  // values in the tree, shared members counted each time they appear

  bool b() const { return b_; }
  int64_t i() const { return kind_ == Kind::kBool ? b_ : i_; }
  double f() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i()); }
  const std::string& s() const { return s_; }  // the string, or an undefined's reason
  // A string's content spans; empty for every other value.
  const ContentSpans& content() const;
  // Some string in this value (itself, list items, dict keys and values, at any depth; a
  // structure nested over 32 deep counts as content) holds content.
  bool HasContent() const;
  List& list() const { return *list_; }
  DictItems& dict() const { return *dict_; }
  const NativeFn& fn() const { return *fn_; }
  const std::string& fn_name() const { return s_; }

  // Dict/namespace member by string key: nullptr when absent.
  Value* Find(std::string_view key) const;
  Value* Find(const Value& key) const;
  void Set(const Value& key, Value v) const;  // insert or replace (dict, namespace)

  bool Truthy() const;
  std::string Str() const;   // Python str(); undefined prints as ""
  std::string Repr() const;  // Python repr()
  // Python's json.dumps(v, ensure_ascii=False, indent, separators, sort_keys); indent < 0:
  // none. InvalidArgument for what JSON cannot hold (undefined, callables).
  absl::StatusOr<std::string> ToJson(int indent = -1, bool sort_keys = false,
                                     const std::string* item_sep = nullptr,
                                     const std::string* key_sep = nullptr) const;
  // Python type name for messages: "str", "int", "list", "dict", "NoneType", ...
  const char* TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  void Count(const Value& member) const;  // adds a member to depth_ and nodes_

  bool b_ = false;
  mutable int32_t depth_ = 0;  // containers: see depth()
  mutable int64_t nodes_ = 1;  // (mutable: a dict literal is filled through Set)
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<DictItems> dict_;
  std::shared_ptr<NativeFn> fn_;
  std::shared_ptr<const ContentSpans> content_;  // strings only; null: none
};

// Python ==: numbers across int/float/bool, strings, lists/tuples and dicts by content.
bool Equals(const Value& a, const Value& b);
// Python <, or InvalidArgument when the types do not order ('<' between str and int).
absl::StatusOr<bool> Less(const Value& a, const Value& b);
// Python repr of a float ("0.1", "1e-05", "1e+16", "2.0", "inf").
std::string FloatRepr(double f);

// Arguments of a call: positional, then keyword in order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument at `index` or named `name`; `fallback` when neither was given.
  Value Get(size_t index, std::string_view name, Value fallback = Value()) const;
};

}  // namespace pinfer::jinja
