// The Jinja-subset interpreter on small cases with known output, its errors (unsupported
// constructs named, syntax errors with lines), and its limits (deep nesting, output size).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jinja/template.h"

namespace pinfer::jinja {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::string> Render(std::string_view src, const std::string& context_json = "{}") {
  auto t = Template::Parse(src);
  if (!t.ok()) return t.status();
  RenderOptions o;
  o.now = 1700000000;
  return t->Render(Value::FromJson(nlohmann::ordered_json::parse(context_json)), o);
}

std::string Ok(std::string_view src, const std::string& context_json = "{}") {
  auto r = Render(src, context_json);
  EXPECT_TRUE(r.ok()) << r.status() << " for " << src;
  return r.ok() ? *r : "";
}

TEST(Jinja, BasicsMatchPython) {
  EXPECT_EQ(Ok("{{ [1, 'a', none, true, 1.5, {'k': 'v'}, (1,2)] }}"),
            "[1, 'a', None, True, 1.5, {'k': 'v'}, (1, 2)]");
  EXPECT_EQ(Ok("{{ 1/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7//2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2**10 }} "
               "{{ 1e20 }} {{ 1e-5 }} {{ 0.1+0.2 }} {{ 1e16 }} {{ 123456789012345678.0 }}"),
            "0.5 2.0 3 -4 1 2 1024 1e+20 1e-05 0.30000000000000004 1e+16 1.2345678901234568e+17");
  EXPECT_EQ(Ok("{% for i in [1,2] %}{% set x = i %}{% endfor %}[{{ x }}]"), "[]");
  EXPECT_EQ(Ok("{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = i * 10 %}{{ x }}{% endfor "
               "%}[{{ x }}]"),
            "110120[1]");
  EXPECT_EQ(Ok("{% macro m() %}{{ x }}{% endmacro %}{% set x = 5 %}{{ m() }}"), "5");
  EXPECT_EQ(Ok("a\n  {% if true %}\n  x\n  {% endif %}\n b\n"), "a\n  x\n b");
  EXPECT_EQ(Ok("{{ \"it's\" }} {{ [\"it's\", 'a\"b', 'a\\nb'] }}"),
            "it's [\"it's\", 'a\"b', 'a\\nb']");
  EXPECT_EQ(Ok("{% set ns = namespace(a=1) %}{% set ns.a = 2 %}{{ ns.a }} {{ ns }}"),
            "2 <Namespace {'a': 2}>");
  EXPECT_EQ(Ok("{{ x }}|{{ x is defined }}|{{ d.b }}", R"({"d": {"a": 1}})"), "|False|");
  EXPECT_EQ(Ok("{{ 'a b c'.split(' ', 1) }} {{ 'XaX'.strip('X') }} {{ 'ab'.endswith(('b','c')) }}"),
            "['a', 'b c'] a True");
  EXPECT_EQ(Ok("{{ 2.5|round }} {{ 3.14159|round(2) }} {{ 2|round }}"), "2.0 3.14 2");
}

TEST(Jinja, ErrorsSayWhatAndWhere) {
  EXPECT_EQ(Render("{% include 'x' %}").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Render("{{ x|wordwrap }}").status().message(), HasSubstr("filter 'wordwrap'"));
  EXPECT_EQ(Render("{{ x|wordwrap }}").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Render("a\n{% if x %}").status().message(), HasSubstr("endif"));
  EXPECT_THAT(Render("\n\n{{ 1 + }}").status().message(), HasSubstr("line 3"));
  EXPECT_THAT(Render("{{ x.y }}").status().message(), HasSubstr("'x' is undefined"));
  EXPECT_THAT(Render("{{ 'a' + 1 }}").status().message(), HasSubstr("can only concatenate"));
  auto raised = Render("{{ raise_exception('roles must alternate') }}");
  EXPECT_EQ(raised.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(raised.status().message(), HasSubstr("roles must alternate"));
  EXPECT_THAT(Render("{{ [1].append(2) }}").status().message(), HasSubstr("unsafe"));
  EXPECT_EQ(Render("{{ 'a{}'.format(1) }}").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Render("{% break %}").status().message(), HasSubstr("outside a loop"));
}

TEST(Jinja, DeepInputIsAnErrorNotACrash) {
  std::string deep = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_THAT(Render(deep).status().message(), HasSubstr("nested deeper"));
  std::string blocks;
  for (int i = 0; i < 5000; ++i) blocks += "{% if true %}";
  EXPECT_THAT(Render(blocks).status().message(), HasSubstr("nested deeper"));
  EXPECT_THAT(Render("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}").status().message(),
              HasSubstr("macro calls nested deeper"));
  auto t = Template::Parse(
      "{% for i in range(1000) %}{% for j in range(1000) %}xxxxxxxxxxxxxxxxxxxx{% endfor %}{% "
      "endfor %}");
  ASSERT_TRUE(t.ok());
  RenderOptions small;
  small.max_output_bytes = 1 << 16;
  EXPECT_EQ(t->Render(Value::MakeDict(), small).status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace pinfer::jinja
