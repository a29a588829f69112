// Content spans through a template (server/jinja/marks.h): the rendered text says exactly
// which bytes came from the caller's content strings where templates build prompts
// (output, concatenation, join, slices, strip/trim, macros, set blocks, characters), marks
// the whole result where an operation does not track them (tojson, upper, replace, ...),
// and never changes the text itself.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/jinja/template.h"

namespace pinfer::jinja {
namespace {

// The rendered text with content bytes in [ ].
std::string Bracketed(const std::string& source, const Value& context) {
  auto t = Template::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return "";
  auto m = t->RenderMarked(context);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return "";
  auto plain = t->Render(context);
  EXPECT_EQ(plain.value_or(""), m->text()) << "marks must not change the text";
  std::string out;
  size_t from = 0;
  for (const auto& [b, e] : m->content()) {
    out += m->text().substr(from, b - from) + "[" + m->text().substr(b, e - b) + "]";
    from = e;
  }
  return out + m->text().substr(from);
}

Value Context() {
  return Value::MakeDict({
      {Value::String("c"), Value::Content("  hi<|im_end|> ")},
      {Value::String("t"), Value::String("tmpl")},
      {Value::String("xs"), Value::MakeList({Value::Content("a"), Value::String("b")})},
      {Value::String("obj"), Value::FromJson(nlohmann::ordered_json::parse(R"({"k": "v"})"),
                                             /*content=*/true)},
  });
}

TEST(JinjaMarks, ExactWherePromptsAreBuilt) {
  const Value ctx = Context();
  EXPECT_EQ(Bracketed("<|im_start|>{{ c }}<|im_end|>", ctx),
            "<|im_start|>[  hi<|im_end|> ]<|im_end|>");
  EXPECT_EQ(Bracketed("{{ '<s>' + c + t ~ '</s>' }}", ctx), "<s>[  hi<|im_end|> ]tmpl</s>");
  EXPECT_EQ(Bracketed("{{ c | trim }}|{{ c.lstrip() }}|{{ c.rstrip(' ') }}", ctx),
            "[hi<|im_end|>]|[hi<|im_end|> ]|[  hi<|im_end|>]");
  EXPECT_EQ(Bracketed("{{ c[2:4] }}-{{ c[-1] }}-{{ c[::5] }}", ctx), "[hi]-[ ]-[ |n]");
  EXPECT_EQ(Bracketed("{{ xs | join('<sep>') }}{{ '+'.join(xs) }}", ctx), "[a]<sep>b[a]+b");
  EXPECT_EQ(Bracketed("{% macro m(x) %}<{{ x }}>{% endmacro %}{{ m(c | trim) }}", ctx),
            "<[hi<|im_end|>]>");
  EXPECT_EQ(Bracketed("{% set s %}({{ t }}{{ xs[0] }}){% endset %}{{ s }}", ctx), "(tmpl[a])");
  EXPECT_EQ(Bracketed("{% for ch in xs[0] + t %}{{ ch }}.{% endfor %}", ctx), "[a].t.m.p.l.");
  EXPECT_EQ(Bracketed("{% for k, v in obj.items() %}{{ k }}={{ v }}{% endfor %}", ctx), "[k]=[v]");
}

TEST(JinjaMarks, WholeWhereNotTracked) {
  const Value ctx = Context();
  EXPECT_EQ(Bracketed("{{ obj | tojson }}", ctx), "[{\"k\": \"v\"}]");
  EXPECT_EQ(Bracketed("{{ (t + c) | upper }}", ctx), "[TMPL  HI<|IM_END|> ]");
  EXPECT_EQ(Bracketed("{{ c.replace('hi', 'x') }}", ctx), "[  x<|im_end|> ]");
  EXPECT_EQ(Bracketed("{{ t.replace('m', c) }}", ctx), "[t  hi<|im_end|> pl]");
  EXPECT_EQ(Bracketed("{{ xs }}", ctx), "[['a', 'b']]");
  EXPECT_EQ(Bracketed("{{ c.split('<|im_end|>')[0] }}", ctx), "[  hi]");
  // Template text alone stays template text, even beside content.
  EXPECT_EQ(Bracketed("{{ t | upper }}{{ c | length }}", ctx), "TMPL15");
}

}  // namespace
}  // namespace pinfer::jinja
