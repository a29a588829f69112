// Every template of tests/server/jinja/templates/ (written for these tests: each construct
// of the subset, and templates with the structure of the Llama 3.1, Qwen2.5, Qwen3, Mistral
// and Gemma chat templates) rendered with each context of its .json file, byte for byte as
// python3-jinja2 renders it under Hugging Face's settings (jinja_reference.py); and each
// conversation of the chat templates sent as an OpenAI request (arguments as JSON text)
// through the server's parser and chat formatter, byte for byte as python3-jinja2 renders
// what apply_chat_template passes (tools None when there are none, arguments as objects).
// Skips, saying so, when python3 or its jinja2 module is missing (scripts/setup.sh installs
// python3-jinja2).
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "server/chat_formatter.h"
#include "server/jinja/builtins.h"
#include "server/jinja/template.h"
#include "server/openai_request.h"
#include "tests/testing/test_models.h"
#include "tests/testing/test_tokenizers.h"

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

class JinjaVersusPython : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HavePythonJinja()) {
      GTEST_SKIP() << "python3 with jinja2 not found (Debian package python3-jinja2, which "
                      "scripts/setup.sh installs): the byte-for-byte comparison did NOT run";
    }
    setenv("TZ", "UTC", 1);  // strftime_now: the same local time on both sides
  }

  // python3-jinja2's renders of template tpath over each context of the file cpath
  // (jinja_reference.py: {"out": text} or the error), or a failure when the script fails.
  static nlohmann::ordered_json Reference(const std::string& tpath, const std::string& cpath) {
    int status = 0;
    const std::string ref = RunCommand("TZ=UTC python3 '" + script_ + "' '" + tpath + "' '" +
                                           cpath + "' " + std::to_string(kEpoch),
                                       &status);
    EXPECT_EQ(status, 0) << "jinja_reference.py failed on " << tpath;
    return status == 0 ? nlohmann::ordered_json::parse(ref) : nlohmann::ordered_json::array();
  }

  const std::string dir_ = testing::SourcePath("tests/server/jinja/templates");
  static inline const std::string script_ =
      testing::SourcePath("tests/server/jinja/jinja_reference.py");
};

TEST_F(JinjaVersusPython, EveryTestTemplateRendersByteForByte) {
  const std::string& dir = dir_;
  int templates = 0, renders = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    const std::string tpath = entry.path().string();
    std::string cpath = tpath.substr(0, tpath.size() - 6) + ".json";
    SCOPED_TRACE(tpath);
    const auto expected = Reference(tpath, cpath);
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

// A message part the server refuses (it reads text parts only; openai_request_test checks the
// refusal).
bool HasNonTextPart(const nlohmann::ordered_json& context) {
  for (const auto& m : context["messages"]) {
    if (!m.contains("content") || !m["content"].is_array()) continue;
    for (const auto& part : m["content"]) {
      if (part.value("type", "") != "text") return true;
    }
  }
  return false;
}

// An HF context (add_generation_prompt true) as the OpenAI request a client would send:
// tool-call arguments as JSON text, the template's other variables (date_string,
// enable_thinking, ...) as chat_template_kwargs.
std::string RequestBody(nlohmann::ordered_json context) {
  for (auto& m : context["messages"]) {
    if (!m.contains("tool_calls")) continue;
    for (auto& call : m["tool_calls"]) {
      auto& args = call["function"]["arguments"];
      if (!args.is_string()) args = args.dump();
    }
  }
  nlohmann::ordered_json body = {{"messages", context["messages"]}};
  if (context.contains("tools")) body["tools"] = context["tools"];
  for (const auto& [k, v] : context.items()) {
    if (k != "messages" && k != "tools" && k != "add_generation_prompt" && k != "bos_token" &&
        k != "eos_token") {
      body["chat_template_kwargs"][k] = v;
    }
  }
  return body.dump();
}

TEST_F(JinjaVersusPython, ChatRequestsRenderAsApplyChatTemplate) {
  const std::string& dir = dir_;
  auto tok = testing::ChatMlTokenizer();  // BOS "<s>", EOS "</s>", as the contexts say
  int compared = 0;
  for (const char* name :
       {"llama31_like", "qwen25_like", "qwen3_like", "mistral_like", "gemma_like"}) {
    SCOPED_TRACE(name);
    const std::string source = ReadFile(dir + "/" + name + ".jinja");
    std::string note;
    RenderOptions at_epoch;
    at_epoch.now = kEpoch;
    auto formatter = server::ChatFormatter::FromJinja(source, *tok, &note, at_epoch);
    ASSERT_TRUE(formatter->is_jinja()) << note;
    // The contexts as apply_chat_template builds them: tools None when absent, every
    // message with a content (null when it had none), a generation prompt.
    auto contexts = nlohmann::ordered_json::parse(ReadFile(dir + "/" + name + ".json"));
    nlohmann::ordered_json hf = nlohmann::ordered_json::array();
    for (auto c : contexts) {
      if (!c.value("add_generation_prompt", false) || HasNonTextPart(c)) continue;
      if (!c.contains("tools")) c["tools"] = nullptr;
      for (auto& m : c["messages"]) {
        if (!m.contains("content")) m["content"] = nullptr;
      }
      hf.push_back(c);
    }
    const std::string hf_path = testing::TempDir("chat_hf") + "/contexts.json";
    std::ofstream(hf_path) << hf.dump();
    const auto expected = Reference(dir + "/" + name + ".jinja", hf_path);
    ASSERT_EQ(expected.size(), hf.size());
    for (size_t i = 0; i < hf.size(); ++i) {
      server::ParsedRequest pr;
      auto e = server::ParseRequest(RequestBody(hf[i]), /*chat=*/true, &pr);
      ASSERT_FALSE(e) << e->message;
      auto pieces = formatter->Format(pr.messages, pr.tools, pr.chat_template_kwargs);
      if (!expected[i].contains("out")) {
        EXPECT_FALSE(pieces.ok()) << "context " << i << ": python failed";
        continue;
      }
      ASSERT_TRUE(pieces.ok()) << "context " << i << ": " << pieces.status();
      std::string got;
      for (const server::PromptPiece& p : *pieces) got += p.text;
      std::string want = expected[i]["out"].get<std::string>();
      // The formatter leaves a leading BOS to the tokenizer (which adds it).
      if (want.rfind("<s>", 0) == 0 && got.rfind("<s>", 0) != 0) got = "<s>" + got;
      EXPECT_EQ(got, want) << "context " << i;
      ++compared;
    }
  }
  EXPECT_GE(compared, 10);
  std::printf("compared %d chat requests with apply_chat_template's renders\n", compared);
}

}  // namespace
}  // namespace pinfer::jinja
