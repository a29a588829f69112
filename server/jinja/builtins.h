// Filters, tests, methods (str, dict) and global functions of the supported Jinja subset.
#pragma once

#include <ctime>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/jinja/value.h"

namespace pinfer::jinja {

bool IsKnownFilter(std::string_view name);
bool IsKnownTest(std::string_view name);

absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& v, const CallArgs& args);
absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& v, const CallArgs& args);

// obj.name as Jinja resolves it: a method of str/dict (bound), else a dict member, else
// undefined. Never an error (using the undefined result may be).
Value GetAttribute(const Value& obj, const std::string& name);
// obj[key]: list/str index (negative from the end), dict member, else undefined.
Value GetItem(const Value& obj, const Value& key);
// The items a for loop visits: list items, dict keys, string characters; undefined: none.
absl::StatusOr<List> Iterate(const Value& v);
// A string's characters (code points), each with its content span.
List Characters(const Value& s);

// Python-like arithmetic and concatenation for the binary operators + - * / // % ** ~.
absl::StatusOr<Value> BinaryOp(const std::string& op, const Value& a, const Value& b);

// range, namespace, dict, raise_exception, strftime_now (formatting `now` in local time).
Value GlobalFunctions(std::time_t now);

// The status raise_exception() returns (its message is the template's text).
inline constexpr char kRaisedPrefix[] = "template raised: ";

}  // namespace pinfer::jinja
