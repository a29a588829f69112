// How content spans (value.h) follow text through a template, so that a rendered prompt says
// which of its bytes came from the caller's data (server/chat_prompt.h encodes those as
// plain text: a message cannot spell a special token).
//
// Exact where templates build prompts: rendered output and {% set %} blocks, macro output,
// concatenation (+ and ~), join (filter and method), slices with step 1, and strip/lstrip/
// rstrip/trim (a substring at a known place). Everywhere else a string made from content is
// content whole: the filters and str methods not named above, single characters (indexing,
// iterating a string), printing a list or dict, * repetition. Over-marking is the safe side:
// marked text only loses the power to spell special tokens.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/jinja/value.h"

namespace pinfer::jinja {

// Text built piece by piece with its content spans.
class MarkedText {
 public:
  void Append(std::string_view text, bool content);
  // A string with its spans; any other value as its str(), content when it HasContent().
  void Append(const Value& v);
  const std::string& text() const { return text_; }
  const ContentSpans& content() const { return content_; }
  size_t size() const { return text_.size(); }
  Value ToValue() const { return Value::String(text_, content_); }

 private:
  std::string text_;
  ContentSpans content_;
};

// a + b (or a ~ b) with both sides' spans.
Value Concat(const Value& a, const Value& b);

// s's bytes [at, at + len) as a string with s's spans over that range.
Value Substring(const Value& s, size_t at, size_t len);

// A result made from `inputs` by an operation that does not track spans: when any input
// holds content, the result's strings without spans (the result itself, or the items of a
// list or tuple result) become content whole. Errors pass through.
absl::StatusOr<Value> Derived(absl::StatusOr<Value> result,
                              std::initializer_list<const Value*> inputs,
                              const CallArgs* args = nullptr);

}  // namespace pinfer::jinja
