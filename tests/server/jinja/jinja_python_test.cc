// Every template of tests/server/jinja/templates/ (written for these tests: each construct
// of the subset, and templates with the structure of the Llama 3.1, Qwen2.5, Qwen3, Mistral
// and Gemma chat templates) rendered with each context of its .json file, byte for byte as
// python3-jinja2 renders it under Hugging Face's settings (jinja_reference.py). Skips,
// saying so, when python3 or its jinja2 module is missing (scripts/setup.sh installs
// python3-jinja2).
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "server/jinja/builtins.h"
#include "server/jinja/template.h"
#include "tests/testing/test_models.h"

namespace pinfer::jinja {
namespace {

constexpr std::time_t kEpoch = 1700000000;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string RunCommand(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  *status = pclose(p);
  return out;
}

bool HavePythonJinja() { return std::system("python3 -c 'import jinja2' >/dev/null 2>&1") == 0; }

TEST(JinjaVersusPython, EveryTestTemplateRendersByteForByte) {
  if (!HavePythonJinja()) {
    GTEST_SKIP() << "python3 with jinja2 not found (Debian package python3-jinja2, which "
                    "scripts/setup.sh installs): the byte-for-byte comparison did NOT run";
  }
  const std::string dir = testing::SourcePath("tests/server/jinja/templates");
  const std::string script = testing::SourcePath("tests/server/jinja/jinja_reference.py");
  setenv("TZ", "UTC", 1);  // strftime_now: the same local time on both sides
  int templates = 0, renders = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    const std::string tpath = entry.path().string();
    std::string cpath = tpath.substr(0, tpath.size() - 6) + ".json";
    SCOPED_TRACE(tpath);
    int status = 0;
    const std::string ref = RunCommand(
        "TZ=UTC python3 '" + script + "' '" + tpath + "' '" + cpath + "' " + std::to_string(kEpoch),
        &status);
    ASSERT_EQ(status, 0) << "jinja_reference.py failed on " << tpath;
    const auto expected = nlohmann::ordered_json::parse(ref);
    const auto contexts = nlohmann::ordered_json::parse(ReadFile(cpath));
    ASSERT_EQ(expected.size(), contexts.size());
    auto tmpl = Template::Parse(ReadFile(tpath));
    EXPECT_TRUE(tmpl.ok()) << tmpl.status();
    if (!tmpl.ok()) continue;
    ++templates;
    for (size_t i = 0; i < contexts.size(); ++i) {
      RenderOptions o;
      o.now = kEpoch;
      auto got = tmpl->Render(Value::FromJson(contexts[i]), o);
      const auto& want = expected[i];
      if (want.contains("out")) {
        EXPECT_TRUE(got.ok()) << "context " << i << ": " << got.status();
        if (got.ok()) {
          EXPECT_EQ(*got, want["out"].get<std::string>()) << "context " << i;
        }
      } else if (want["error"] == "raised") {
        EXPECT_FALSE(got.ok()) << "context " << i << " rendered, python raised";
        EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_EQ(std::string(got.status().message()),
                  std::string(kRaisedPrefix) + want["message"].get<std::string>());
      } else {
        EXPECT_FALSE(got.ok()) << "context " << i << ": python failed with " << want.dump();
      }
      ++renders;
    }
  }
  EXPECT_GE(templates, 14);
  std::printf("compared %d templates, %d renders with python3-jinja2\n", templates, renders);
}

}  // namespace
}  // namespace pinfer::jinja
