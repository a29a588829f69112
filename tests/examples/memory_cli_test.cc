// Memory from the command line (issue 15), through the built binary ($PAGEDINFER_BIN) on a
// synthetic tiny model: `plan`, the engine (`run`) and its memory report print the same bytes
// for one configuration; `run` with default flags reserves one max_model_len sequence; --mlock
// locks and, when the memlock limit refuses, says so; and where a memory cgroup can be made,
// a second engine in another process refuses to start when the first left too little.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cli_process.h"
#include "tests/testing/memory_limits.h"
#include "tests/testing/serve_process.h"
#include "tests/testing/synth_models.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::RunCommand;

const std::string& TinyModel() {
  static const std::string path = testing::SynthModelPath("tiny", "Q8_0");
  return path;
}

#define REQUIRE_BIN()                               \
  const std::string bin = testing::PagedinferBin(); \
  if (bin.empty()) GTEST_SKIP() << "pagedinfer binary not built ($PAGEDINFER_BIN unset)"

CommandResult Pinfer(const std::string& bin, std::vector<std::string> args) {
  args.insert(args.begin(), bin);
  return RunCommand(args);
}

// argv run by a child that first gives up CAP_IPC_LOCK and sets a memlock limit (exit status
// 77 with the reason in err when it cannot); its stderr collected.
CommandResult RunWithMemlockLimit(std::vector<std::string> argv, uint64_t limit) {
  const std::string err_path = testing::TempDir("memory_cli_memlock") + "/stderr.txt";
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) dup2(err, 2);
    std::string why;
    if (!testing::DropMemlockPrivilege(limit, &why)) {
      (void)!write(2, why.data(), why.size());
      _exit(77);
    }
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  CommandResult r;
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(err_path);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return r;
}

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// One configuration, three printouts: plan's ledger, the engine's ledger, and the predicted
// bytes of every line at every stage of the memory report.
TEST(MemoryCli, PlanEngineAndReportPrintTheSameBytes) {
  REQUIRE_BIN();
  const std::vector<std::string> flags = {"-m", TinyModel(), "-c", "256", "-np",        "3",
                                          "-b", "64",        "-t", "2",   "--kv-dtype", "q8_0"};
  for (const std::string& pool : {std::string(), std::string("3MiB")}) {
    const std::string report = testing::TempDir("memory_cli_run") + "/report.json";
    std::vector<std::string> plan = {"plan", "--device", "cpu", "--json"};
    std::vector<std::string> run = {"run", "-n", "8", "--temp", "0", "--memory-report-json",
                                    report};
    for (auto* v : {&plan, &run}) {
      v->insert(v->end(), flags.begin(), flags.end());
      if (!pool.empty()) v->insert(v->end(), {"--kv-cache-memory", pool});
    }
    CommandResult p = Pinfer(bin, plan);
    ASSERT_EQ(p.rc, 0) << p.err;
    const json planned = json::parse(p.out);
    CommandResult r = Pinfer(bin, run);
    ASSERT_EQ(r.rc, 0) << r.err;
    const json ran = ReadJson(report);
    ASSERT_TRUE(ran.is_object()) << r.err;
    const json& ledger = ran["ledger"];
    for (const char* key : {"weights_bytes", "workspace_bytes", "reserve_bytes", "kv_pool_bytes",
                            "kv_pool_blocks", "kv_bytes_per_token", "total_bytes"}) {
      EXPECT_EQ(planned[key], ledger[key]) << key << " pool " << pool;
    }
    EXPECT_EQ(planned["workspace"], ledger["workspace"]);
    EXPECT_EQ(planned["pool_bound"], pool.empty() ? "work" : "explicit");
    const std::map<std::string, std::string> line_key = {{"weights", "weights_bytes"},
                                                         {"kv cache", "kv_pool_bytes"},
                                                         {"workspace", "workspace_bytes"},
                                                         {"runtime reserve", "reserve_bytes"}};
    ASSERT_EQ(ran["report"]["stages"].size(), 5u);
    for (const json& stage : ran["report"]["stages"]) {
      for (const json& line : stage["lines"]) {
        EXPECT_EQ(line["predicted_bytes"], planned[line_key.at(line["line"])])
            << stage["stage"] << " " << line["line"];
      }
    }
  }
}

TEST(MemoryCli, RunReservesOneSequenceByDefault) {
  REQUIRE_BIN();
  CommandResult r = Pinfer(bin, {"run", "-m", TinyModel(), "-n", "4", "-t", "2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // tiny: context 1024, so one sequence of max_model_len 1024: 64 blocks.
  EXPECT_NE(r.err.find("KV pool: 1024 tokens in 64 blocks of 16"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sized for 1 sequence of max_model_len 1024"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("committed in"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("memory: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("paged in"), std::string::npos) << r.err;
}

// The CPU backend repacks the Q4_0 matrices at load (engine/cpu/repack.h), and plan applies the
// same rule: on stories260K's Q4_0 copy (ffn_gate / ffn_up of 172 rows, so the packed bytes
// include a padded last group of 8 rows) plan's weights equal the engine's, with and without
// --no-repack, and differ from each other by that padding.
TEST(MemoryCli, PlanCountsRepackedWeightsAsTheEngineHoldsThem) {
  REQUIRE_BIN();
  PINFER_REQUIRE_MODEL(stories, "stories260K.gguf");
  const std::string dir = testing::TempDir("memory_cli_repack");
  const std::string q4 = dir + "/stories-q4_0.gguf";
  CommandResult q = Pinfer(bin, {"quantize", stories, q4, "q4_0"});
  ASSERT_EQ(q.rc, 0) << q.err;
  std::map<bool, json> weights;
  bool repacked = false;
  for (bool repack : {true, false}) {
    const std::string report = dir + (repack ? "/on.json" : "/off.json");
    std::vector<std::string> flags = {"-m", q4, "-c", "128", "-t", "2"};
    if (!repack) flags.push_back("--no-repack");
    std::vector<std::string> plan = {"plan", "--device", "cpu", "--json"};
    std::vector<std::string> run = {"run", "-n", "4", "--temp", "0", "--memory-report-json",
                                    report};
    plan.insert(plan.end(), flags.begin(), flags.end());
    run.insert(run.end(), flags.begin(), flags.end());
    CommandResult p = Pinfer(bin, plan);
    ASSERT_EQ(p.rc, 0) << p.err;
    CommandResult r = Pinfer(bin, run);
    ASSERT_EQ(r.rc, 0) << r.err;
    if (repack) repacked = r.err.find("repacked") != std::string::npos;
    const json ran = ReadJson(report);
    ASSERT_TRUE(ran.is_object()) << r.err;
    EXPECT_EQ(json::parse(p.out)["weights_bytes"], ran["ledger"]["weights_bytes"])
        << "repack " << repack;
    weights[repack] = ran["ledger"]["weights_bytes"];
  }
  if (repacked) {
    EXPECT_GT(weights[true].get<uint64_t>(), weights[false].get<uint64_t>());
  } else {
    EXPECT_EQ(weights[true], weights[false]);
  }
}

TEST(MemoryCli, MlockLocksOrSaysWhyNot) {
  REQUIRE_BIN();
  const std::string report = testing::TempDir("memory_cli_mlock") + "/report.json";
  CommandResult r = Pinfer(bin, {"run", "-m", TinyModel(), "-n", "2", "-t", "2", "--mlock",
                                 "--memory-report-json", report});
  if (r.rc == 0) {
    EXPECT_NE(r.err.find("locked"), std::string::npos) << r.err;
    const json j = ReadJson(report);
    EXPECT_EQ(j["report"]["stages"][0]["lines"][0]["note"], "locked in memory (--mlock)");
  } else {
    EXPECT_NE(r.err.find("RLIMIT_MEMLOCK"), std::string::npos) << r.err;
  }
  // Without CAP_IPC_LOCK and with a 64 KiB memlock limit, --mlock is refused at start with
  // the limit named.
  CommandResult refused = RunWithMemlockLimit(
      {bin, "run", "-m", TinyModel(), "-n", "2", "-t", "2", "--mlock"}, 64 << 10);
  if (refused.rc == 77) GTEST_SKIP() << "cannot drop CAP_IPC_LOCK here: " << refused.err;
  EXPECT_EQ(refused.rc, 1) << refused.err;
  EXPECT_NE(refused.err.find("--mlock: cannot lock"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("RLIMIT_MEMLOCK"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("64.00 KiB"), std::string::npos) << refused.err;
}

// Two processes in one memory cgroup: the first (serve) commits its pool; the second (run),
// asking for more than what is left under the limit, refuses at start with the ledger's
// message instead of being killed later.
TEST(MemoryCli, SecondProcessRefusesWhenTheFirstLeftTooLittle) {
  REQUIRE_BIN();
  std::string why;
  auto cgroup = testing::MemoryCgroup::Create("pinfer-two", 1ull << 30, &why);
  if (!cgroup) GTEST_SKIP() << "no memory cgroup can be made here: " << why;
  testing::ServeProcess first(
      cgroup->Wrap({bin, "serve", "-m", TinyModel(), "--port", "0", "-t", "2", "--kv-cache-memory",
                    "600MiB", "--reserve", "8MiB"}),
      "memory_cli_first");
  ASSERT_GT(first.port(), 0) << first.Log();
  CommandResult second = RunCommand(cgroup->Wrap(
      {bin, "run", "-m", TinyModel(), "-n", "2", "-t", "2", "--kv-cache-memory", "600MiB"}));
  EXPECT_NE(second.rc, 0);
  EXPECT_NE(second.err.find("refusing to start"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("is available (memory cgroup"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("longest max_model_len that fits is"), std::string::npos) << second.err;
  EXPECT_EQ(cgroup->OomKills(), 0);
  first.Signal(SIGTERM);
  EXPECT_EQ(first.Wait(30), 0) << first.Log();
}

}  // namespace
}  // namespace pinfer
