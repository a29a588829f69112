// The Jinja-subset interpreter on small cases with known output, its errors (unsupported
// constructs named, syntax errors with lines), and its limits (deep nesting, output size).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jinja/template.h"
#include "tests/testing/sanitizer.h"

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

// A render under small step and work bounds (4,096 loop iterations and macro calls, 4 Mi of
// work), which hostile templates reach in milliseconds even under sanitizers.
absl::StatusOr<std::string> Bounded(std::string_view src) {
  auto t = Template::Parse(src);
  if (!t.ok()) return t.status();
  RenderOptions o;
  o.now = 1700000000;
  o.max_steps = 1 << 12;
  o.max_work = 1 << 22;
  return t->Render(Value::MakeDict(), o);
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

// What chat_template_fuzz found (tests/fuzz/regressions/chat_template_fuzz/ keeps the inputs):
// each is an error saying what, where the interpreter overflowed, recursed without end,
// leaked, or ran for hours.
TEST(Jinja, HostileTemplatesFailWithAClearError) {
  const std::string kMin = "(-(2 ** 62) - 2 ** 62)";  // -2^63: literals stop at 18 digits
  for (const std::string& src :
       {std::string("{{ 2 ** 62 + 2 ** 62 }}"), std::string("{{ 3 ** 41 }}"),
        "{{ " + kMin + " - 1 }}", "{{ " + kMin + " // -1 }}", "{{ -" + kMin + " }}",
        "{{ " + kMin + "|abs }}", std::string("{{ 2 ** 32 * 2 ** 32 }}")}) {
    EXPECT_THAT(Render(src).status().message(), HasSubstr("integer overflow")) << src;
  }
  EXPECT_EQ(Ok("{{ 2 ** 62 + (2 ** 62 - 1) }} {{ (-1) ** 1001 }} {{ 2 ** -1 }} {{ 7 // -2 }}"),
            "9223372036854775807 -1 0.5 -4");
  EXPECT_EQ(Ok("{{ " + kMin + " is divisibleby(-1) }}"), "True");
  // Python's % on -2^63 and -1 is 0 (C++'s is undefined); // and % by zero are errors.
  EXPECT_EQ(Ok("{{ " + kMin + " % -1 }} {{ 7 % -1 }} {{ 7 // -1 }} {{ -7 % 2 }} {{ 7 % -2 }}"),
            "0 0 -7 1 -1");
  for (const char* src : {"{{ 7 // 0 }}", "{{ 7 % 0 }}", "{{ 7.5 // 0 }}", "{{ 1 % 0.0 }}"}) {
    EXPECT_THAT(Render(src).status().message(), HasSubstr("by zero")) << src;
  }
  EXPECT_EQ(Ok("{{ range(2 ** 62 + (2 ** 62 - 2), 2 ** 62 + (2 ** 62 - 1), 5)|list|length }}"),
            "1");
  EXPECT_EQ(Ok("{{ [1, 2, 3][1::(2 ** 62 - 1) + 2 ** 62] }}"), "[2]");
  EXPECT_THAT(Render("{{ 'ab' * (2 ** 62) }}").status().message(), HasSubstr("too large"));
  EXPECT_THAT(Render("{{ 1e300|int }}").status().message(), HasSubstr("no 64-bit integer"));
  EXPECT_EQ(Render("{{ 'a\nb'|indent(1000000000000) }}").status().code(),
            absl::StatusCode::kResourceExhausted);
  // A namespace holding itself (a cycle: printing it recursed until the stack ran out) or any
  // namespace, chains and doublings built through one, strings doubled in a loop.
  EXPECT_THAT(Render("{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns }}").status().message(),
              HasSubstr("would hold a namespace"));
  EXPECT_THAT(Render("{% set a = namespace() %}{{ namespace(x=[a]) }}").status().message(),
              HasSubstr("cannot hold a namespace"));
  EXPECT_EQ(Bounded("{% set ns = namespace(a=[]) %}{% for i in range(100000) %}"
                    "{% set ns.a = [ns.a] %}{% endfor %}")
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Render("{% set ns = namespace(a=[1]) %}{% for i in range(60) %}"
                   "{% set ns.a = [ns.a, ns.a] %}{% endfor %}{{ ns.a }}")
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Render("{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                     "{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                  .status()
                  .message(),
              HasSubstr("a string longer than"));
  EXPECT_THAT(Bounded("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                      "{% endfor %}")
                  .status()
                  .message(),
              HasSubstr("more than 4096 loop iterations and macro calls"));
  EXPECT_THAT(Bounded("{% macro f() %}{% endmacro %}{% for i in range(5000) %}{{ f() }}"
                      "{% endfor %}")
                  .status()
                  .message(),
              HasSubstr("loop iterations and macro calls"));
  // Values within the bounds, read in a loop within the step bound: terabytes of copies.
  EXPECT_THAT(Bounded("{% set s = 'a' * 3000000 %}{% for i in range(1000) %}"
                      "{% set t = s ~ 'b' %}{% endfor %}")
                  .status()
                  .message(),
              HasSubstr("more than 4194304 bytes of strings and values computed"));
  // Within the bounds, namespaces still hold what templates keep in them.
  EXPECT_EQ(Ok("{% set ns = namespace(msgs=[], n=0) %}{% for m in ['a', 'b'] %}"
               "{% set ns.msgs = ns.msgs + [{'c': m}] %}{% set ns.n = ns.n + 1 %}{% endfor %}"
               "{{ ns.n }} {{ ns.msgs }}"),
            "2 [{'c': 'a'}, {'c': 'b'}]");
  EXPECT_EQ(Bounded("{% for i in range(4000) %}{% endfor %}{{ ('x' * 1000000)|length }}").value(),
            "1000000");  // just within both bounds
}

// The default bounds, reached as the server would reach them (RenderOptions{}). Skipped under
// sanitizers: 2^18 loop iterations take minutes there (HostileTemplates checks the same
// errors at small bounds in every build).
TEST(Jinja, DefaultBoundsStopRunawayRenders) {
  if (pinfer::testing::kUnderSanitizer)
    GTEST_SKIP() << "2^18 iterations under a sanitizer: minutes";
  EXPECT_THAT(
      Render("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}")
          .status()
          .message(),
      HasSubstr("more than 262144 loop iterations"));
  EXPECT_THAT(Render("{% set s = 'a' * 16000000 %}{% for i in range(200000) %}"
                     "{% set t = s ~ 'b' %}{% endfor %}")
                  .status()
                  .message(),
              HasSubstr("more than 268435456 bytes of strings and values computed"));
  // A long conversation stays well inside them: 2,000 messages through a ChatML-like loop.
  std::string messages = "[";
  for (int i = 0; i < 2000; ++i) {
    messages += std::string(i ? "," : "") + R"({"role": "user", "content": ")" +
                std::string(400, static_cast<char>('a' + i % 26)) + R"("})";
  }
  const std::string chat =
      Ok("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n"
         "{% endfor %}",
         R"({"messages": )" + messages + "]}");
  EXPECT_EQ(chat.size(), 2000u * (12 + 4 + 1 + 400 + 10 + 1));
}

}  // namespace
}  // namespace pinfer::jinja
