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
// client); ResourceExhausted is output over max_output_bytes.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/jinja/ast.h"
#include "server/jinja/value.h"

namespace pinfer::jinja {

struct RenderOptions {
  std::optional<std::time_t> now;  // strftime_now's time (local); unset: the current time
  size_t max_output_bytes = 16 << 20;
};

class Template {
 public:
  static absl::StatusOr<Template> Parse(std::string_view source);

  // context: a dict whose members become the template's variables (messages, tools,
  // add_generation_prompt, bos_token, ...).
  absl::StatusOr<std::string> Render(const Value& context, const RenderOptions& options = {}) const;

 private:
  Body body_;
};

}  // namespace pinfer::jinja
