#include "server/jinja/template.h"

#include "absl/strings/str_cat.h"
#include "server/jinja/builtins.h"
#include "server/jinja/lexer.h"
#include "server/jinja/parser.h"
#include "server/jinja/renderer.h"

namespace pinfer::jinja {

absl::StatusOr<Template> Template::Parse(std::string_view source) {
  auto segments = Lex(source);
  if (!segments.ok()) return segments.status();
  auto body = ParseTemplate(*segments);
  if (!body.ok()) return body.status();
  Template t;
  t.body_ = std::move(*body);
  return t;
}

absl::StatusOr<std::string> Template::Render(const Value& context,
                                             const RenderOptions& options) const {
  auto marked = RenderMarked(context, options);
  if (!marked.ok()) return marked.status();
  return marked->text();
}

absl::StatusOr<MarkedText> Template::RenderMarked(const Value& context,
                                                  const RenderOptions& options) const {
  std::vector<std::pair<std::string, Value>> globals;
  const Value functions = GlobalFunctions(options.now ? *options.now : std::time(nullptr));
  for (const auto& [k, v] : functions.dict()) globals.push_back({k.s(), v});
  if (context.is_mapping()) {
    for (const auto& [k, v] : context.dict()) {
      if (k.is_string()) globals.push_back({k.s(), v});
    }
  }
  Renderer r(std::move(globals), options);
  MarkedText out;
  try {
    absl::Status st = r.Exec(body_, &out);
    if (!st.ok()) return st;
  } catch (const std::exception& e) {  // std::bad_alloc, std::length_error: a string too large
    return absl::ResourceExhaustedError(absl::StrCat("template render failed: ", e.what()));
  }
  return out;
}

}  // namespace pinfer::jinja
