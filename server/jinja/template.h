// A chat template in the Jinja subset that model hubs' templates use, parsed once and
// rendered per request, with Hugging Face's settings (trim_blocks, lstrip_blocks, the
// loopcontrols extension, tojson without HTML escaping, raise_exception and strftime_now).
//
// Supported: text; {{ }}; {# #}; whitespace control (-, +); {% if/elif/else %},
// {% for %} (tuple targets, an `if` filter, else, loop.index/index0/revindex/revindex0/
// first/last/length/previtem/nextitem/depth/cycle, break, continue), {% set %} (names,
// tuples, namespace attributes, {% set x %}...{% endset %}), {% macro %} (defaults,
// varargs, kwargs), {% raw %}, {% generation %}; literals, lists, dicts, tuples, attribute
// and item access, slices, calls, the operators (and or not in, comparisons, + - * / // % **
// ~, a if c else b); the filters, tests, str/dict methods and globals of builtins.h's lists.
// Output matches python3-jinja2 byte for byte on tests/server/jinja/.
//
// Errors: Unimplemented names a construct outside the subset ({% include %}, a filter,
// str.format) so that the caller can fall back to a built-in template; InvalidArgument is
// a template syntax or runtime error (line named); FailedPrecondition is raise_exception()
// (the template refusing the conversation: its message, after kRaisedPrefix, is for the
// client); ResourceExhausted is output over max_output_bytes, or a render past the bounds that
// keep a hostile template from exhausting the server: values (value.h: nesting, size, string
// bytes; what a namespace may hold), steps (loop iterations and macro calls) and work (bytes
// and values computed: RenderOptions). Integer arithmetic that would not fit in 64
// bits (Python's integers have no bound) is InvalidArgument, never a wrapped value.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/jinja/ast.h"
#include "server/jinja/marks.h"
#include "server/jinja/value.h"

namespace pinfer::jinja {

// What a render may take. The defaults hold every real template on conversations of any size
// the server accepts; tests and the fuzz target lower them to reach them quickly.
struct RenderOptions {
  std::optional<std::time_t> now;  // strftime_now's time (local); unset: the current time
  size_t max_output_bytes = 16 << 20;
  // Loop iterations and macro calls (nested loops over range() could run for hours).
  int64_t max_steps = int64_t{1} << 18;
  // Work, counted as the bytes of every string and the values of every list or dict an
  // expression yields (a name's value is copied each time it is read): a loop within
  // max_steps over values within value.h's bounds could otherwise copy terabytes (2^18 reads
  // of a 16 MiB string).
  int64_t max_work = int64_t{1} << 28;
};

class Template {
 public:
  static absl::StatusOr<Template> Parse(std::string_view source);

  // context: a dict whose members become the template's variables (messages, tools,
  // add_generation_prompt, bos_token, ...).
  absl::StatusOr<std::string> Render(const Value& context, const RenderOptions& options = {}) const;
  // The same text with its content spans: the bytes that came from the context's content
  // strings (Value::Content, FromJson(j, true)), as marks.h follows them.
  absl::StatusOr<MarkedText> RenderMarked(const Value& context,
                                          const RenderOptions& options = {}) const;

 private:
  Body body_;
};

}  // namespace pinfer::jinja
