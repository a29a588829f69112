// The flags every model-running subcommand shares, end to end through the built binary
// ($PAGEDINFER_BIN): --device cuda without a usable GPU is an error naming the device in
// run, chat, serve, bench, bench-kv and perplexity; serve and chat print the device line;
// llama.cpp's short flags (-c, -np, -b, -ngl, -f, --chat-template) mean what they mean there;
// quantize prints a line per tensor on a terminal and nothing through a pipe.
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/cli_process.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using testing::CommandResult;
using testing::PagedinferBin;
using testing::RunCommand;

#define REQUIRE_BIN_AND_MODEL()                                                           \
  const std::string bin = PagedinferBin();                                                \
  if (bin.empty()) GTEST_SKIP() << "pagedinfer binary not built ($PAGEDINFER_BIN unset)"; \
  PINFER_REQUIRE_MODEL(model, "stories260K.gguf")

CommandResult Pinfer(const std::string& bin, std::vector<std::string> args,
                     const std::string& input = "") {
  args.insert(args.begin(), bin);
  return RunCommand(args, input);
}

// True when `run --device auto` found a GPU (then --device cuda is expected to work).
bool HasGpu(const std::string& bin, const std::string& model) {
  CommandResult r = Pinfer(bin, {"run", "-m", model, "-n", "1", "--device", "auto"});
  return r.err.find("device: cuda") != std::string::npos;
}

TEST(EngineFlagsCli, DeviceCudaWithoutGpuIsAnErrorEverywhere) {
  REQUIRE_BIN_AND_MODEL();
  if (HasGpu(bin, model)) GTEST_SKIP() << "this machine has a GPU: --device cuda works here";
  const std::string text = testing::SourcePath("data/stories.txt");
  const std::vector<std::vector<std::string>> commands = {
      {"run", "-m", model, "-n", "4"},
      {"chat", "-m", model},
      {"serve", "-m", model, "--port", "0"},
      {"bench", "-m", model, "-p", "8", "-n", "4", "-r", "1"},
      {"bench-kv", "-m", model, "--requests", "2", "--min", "8", "--max", "24", "-c", "64"},
      {"perplexity", "-m", model, "-f", text, "-c", "64", "--chunks", "1"},
  };
  for (std::vector<std::string> args : commands) {
    args.push_back("--device");
    args.push_back("cuda");
    CommandResult r = Pinfer(bin, args, "/exit\n");
    EXPECT_NE(r.rc, 0) << args[0] << " --device cuda ran without a GPU:\n" << r.err;
    EXPECT_NE(r.err.find("--device cuda"), std::string::npos) << args[0] << ": " << r.err;
    const bool names_device = r.err.find("no CUDA device") != std::string::npos ||
                              r.err.find("no CUDA backend") != std::string::npos;
    EXPECT_TRUE(names_device) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err.find("device: cpu"), std::string::npos) << args[0] << " ran on the cpu";
  }
}

TEST(EngineFlagsCli, ServeAndChatPrintTheDeviceLine) {
  REQUIRE_BIN_AND_MODEL();
  CommandResult chat = Pinfer(bin, {"chat", "-m", model, "--device", "cpu"}, "/exit\n");
  EXPECT_EQ(chat.rc, 0) << chat.err;
  EXPECT_NE(chat.err.find("device: cpu, "), std::string::npos) << chat.err;
  // An address that is no interface of this machine: serve loads, prints, then cannot bind.
  CommandResult serve =
      Pinfer(bin, {"serve", "-m", model, "--device", "cpu", "--host", "203.0.113.7"});
  EXPECT_NE(serve.rc, 0);
  EXPECT_NE(serve.err.find("device: cpu, "), std::string::npos) << serve.err;
  EXPECT_NE(serve.err.find("KV pool: "), std::string::npos) << serve.err;
  EXPECT_NE(serve.err.find("cannot listen"), std::string::npos) << serve.err;
}

TEST(EngineFlagsCli, NglZeroIsTheCpuAndAPartialOffloadIsRefused) {
  REQUIRE_BIN_AND_MODEL();
  CommandResult cpu = Pinfer(bin, {"run", "-m", model, "-n", "2", "-ngl", "0"});
  EXPECT_EQ(cpu.rc, 0) << cpu.err;
  EXPECT_NE(cpu.err.find("device: cpu"), std::string::npos) << cpu.err;
  CommandResult part = Pinfer(bin, {"run", "-m", model, "-n", "2", "-ngl", "2"});
  EXPECT_NE(part.rc, 0);
  EXPECT_NE(part.err.find("offloads part of the model's 5 layers"), std::string::npos) << part.err;
  CommandResult clash =
      Pinfer(bin, {"run", "-m", model, "-n", "2", "-ngl", "0", "--device", "cuda"});
  EXPECT_NE(clash.rc, 0);
  EXPECT_NE(clash.err.find("contradicts --device cuda"), std::string::npos) << clash.err;
}

TEST(EngineFlagsCli, LlamaCppShortFlags) {
  REQUIRE_BIN_AND_MODEL();
  // -c is the context (max_model_len): 100 tokens do not fit in 32.
  CommandResult c = Pinfer(bin, {"run", "-m", model, "-c", "32", "-n", "100", "-p", "Once"});
  EXPECT_NE(c.rc, 0);
  EXPECT_NE(c.err.find("exceed max_model_len 32"), std::string::npos) << c.err;
  // -np and -b: sequences at once and tokens per step, shown in the pool line.
  CommandResult np = Pinfer(
      bin, {"run", "-m", model, "-np", "3", "-b", "64", "-c", "64", "-n", "4", "--temp", "0"});
  EXPECT_EQ(np.rc, 0) << np.err;
  EXPECT_NE(np.err.find("max_model_len 64 fits 3 sequences"), std::string::npos) << np.err;
  // -f: the prompt from a file, the same text as -p.
  const std::string file = testing::TempDir("flags") + "/prompt.txt";
  FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("Once upon a time", f);
  std::fclose(f);
  CommandResult from_p =
      Pinfer(bin, {"run", "-m", model, "-p", "Once upon a time", "-n", "16", "--temp", "0"});
  CommandResult from_f = Pinfer(bin, {"run", "-m", model, "-f", file, "-n", "16", "--temp", "0"});
  EXPECT_EQ(from_p.rc, 0) << from_p.err;
  EXPECT_EQ(from_f.rc, 0) << from_f.err;
  EXPECT_FALSE(from_p.out.empty());
  EXPECT_EQ(from_f.out, from_p.out);
}

TEST(EngineFlagsCli, RunContinuesThePromptAndDrawsASeed) {
  REQUIRE_BIN_AND_MODEL();
  // The continuation keeps its leading space: "Once upon" + " a time".
  CommandResult space =
      Pinfer(bin, {"run", "-m", model, "-p", "Once upon", "-n", "4", "--temp", "0"});
  EXPECT_EQ(space.rc, 0) << space.err;
  EXPECT_EQ(space.out.rfind(" a time", 0), 0u) << space.out;
  // --temp 1 without -s: a fresh seed each run (printed); with -s the same text again.
  const std::vector<std::string> t1 = {"run",     "-m", model,     "-n", "64",      "--temp", "1",
                                       "--top-k", "0",  "--top-p", "1",  "--min-p", "0"};
  CommandResult a = Pinfer(bin, t1), b = Pinfer(bin, t1);
  EXPECT_NE(a.out, b.out);
  EXPECT_NE(a.err.find("(seed "), std::string::npos) << a.err;
  std::vector<std::string> seeded = t1;
  seeded.insert(seeded.end(), {"-s", "77"});
  CommandResult c = Pinfer(bin, seeded), d = Pinfer(bin, seeded);
  EXPECT_EQ(c.out, d.out);
  EXPECT_NE(c.err.find("(seed 77)"), std::string::npos) << c.err;
}

TEST(EngineFlagsCli, ChatTemplateByNameOrFile) {
  REQUIRE_BIN_AND_MODEL();
  CommandResult byname = Pinfer(bin, {"chat", "-m", model, "--chat-template", "llama2"}, "/exit\n");
  EXPECT_EQ(byname.rc, 0) << byname.err;
  EXPECT_NE(byname.err.find("chat template: built-in llama2 (--chat-template)"), std::string::npos)
      << byname.err;
  const std::string file = testing::TempDir("tmpl") + "/t.jinja";
  FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{% endfor %}",
             f);
  std::fclose(f);
  CommandResult byfile = Pinfer(bin, {"chat", "-m", model, "--chat-template", file}, "/exit\n");
  EXPECT_EQ(byfile.rc, 0) << byfile.err;
  EXPECT_NE(byfile.err.find("chat template: jinja, from " + file), std::string::npos) << byfile.err;
  // A construct the interpreter lacks: the family recognised in it, saying why, once.
  f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{% include 'header.jinja' %}<|start_header_id|>{{ messages[0].content }}", f);
  std::fclose(f);
  CommandResult fallback = Pinfer(bin, {"chat", "-m", model, "--chat-template", file}, "/exit\n");
  EXPECT_EQ(fallback.rc, 0) << fallback.err;
  EXPECT_NE(fallback.err.find("chat template: built-in llama3 (the Jinja template fails: "),
            std::string::npos)
      << fallback.err;
  EXPECT_NE(fallback.err.find("include"), std::string::npos) << fallback.err;
  CommandResult bad =
      Pinfer(bin, {"serve", "-m", model, "--port", "0", "--chat-template", "nonsense"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("neither a built-in template (chatml, llama2"), std::string::npos)
      << bad.err;
}

TEST(EngineFlagsCli, ChatCapsTheReplyAtTheContext) {
  REQUIRE_BIN_AND_MODEL();
  // -n far beyond -c: each reply gets what the context leaves instead of an error.
  CommandResult r = Pinfer(bin, {"chat", "-m", model, "-c", "96", "-n", "2000", "--temp", "0"},
                           "Tell me a story.\nAnd another one.\n/exit\n");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err.find("error:"), std::string::npos) << r.err;
  EXPECT_GT(r.out.size(), 20u) << r.out;
}

TEST(EngineFlagsCli, QuantizeProgressOnATerminalOnly) {
  REQUIRE_BIN_AND_MODEL();
  const std::string dir = testing::TempDir("quant_progress");
  CommandResult piped = Pinfer(bin, {"quantize", model, dir + "/a.gguf", "Q8_0"});
  EXPECT_EQ(piped.rc, 0) << piped.err;
  EXPECT_EQ(piped.err.find("token_embd.weight"), std::string::npos) << piped.err;
  auto tty = testing::PtyProcess::Start({bin, "quantize", model, dir + "/b.gguf", "Q8_0"});
  ASSERT_NE(tty, nullptr);
  EXPECT_TRUE(tty->WaitFor("wrote ")) << tty->output();
  EXPECT_EQ(tty->Wait(), 0) << tty->output();
  // A line per tensor, numbered out of the file's 48, in file order.
  EXPECT_NE(tty->output().find("[ 1/48] token_embd.weight"), std::string::npos) << tty->output();
  EXPECT_NE(tty->output().find("[48/48] "), std::string::npos) << tty->output();
  EXPECT_NE(tty->output().find("F32 -> Q8_0"), std::string::npos) << tty->output();
}

}  // namespace
}  // namespace pinfer
