// pagedinfer bench-serve end to end: `pagedinfer serve` on stories260K on a free loopback
// port, driven by `pagedinfer bench-serve` ($PAGEDINFER_BIN) with a small seeded workload.
// Checks the report's shape and that every request completed with the workload's output
// lengths (ignore_eos); never timings. Skips when the model or the binary is absent.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// `pagedinfer serve` in a child process, stopped (SIGTERM, then waited for) at the end.
class ServeProcess {
 public:
  ServeProcess(const std::string& bin, const std::string& model, const std::string& log) {
    pid_ = fork();
    if (pid_ == 0) {
      freopen(log.c_str(), "w", stderr);
      execl(bin.c_str(), bin.c_str(), "serve", "-m", model.c_str(), "--host", "127.0.0.1", "--port",
            "0", "--max-model-len", "256", "--max-num-seqs", "8", "--threads", "2", "--model-id",
            "stories260K", static_cast<char*>(nullptr));
      _exit(127);
    }
    const std::regex port_line("on http://127\\.0\\.0\\.1:([0-9]+)");
    for (int i = 0; i < 300 && port_ == 0; ++i) {  // up to 30 s to load and listen
      std::smatch m;
      const std::string text = Slurp(log);
      if (std::regex_search(text, m, port_line)) port_ = std::stoi(m[1]);
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  bool alive() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

struct BenchRun {
  int rc = -1;
  std::string out, err;
};

BenchRun RunBench(const std::string& bin, const std::string& args, const std::string& dir) {
  const std::string out = dir + "/bench.out", err = dir + "/bench.err";
  const std::string cmd = "timeout 120 " + bin + " bench-serve " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  BenchRun r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

class BenchServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("PAGEDINFER_BIN");
    if (!bin || access(bin, X_OK) != 0) GTEST_SKIP() << "PAGEDINFER_BIN is not built";
    bin_ = bin;
    model_ = testing::ModelPath("stories260K.gguf");
    if (model_.empty()) {
      GTEST_SKIP() << "stories260K.gguf not found under " << testing::ModelsDir();
    }
    dir_ = testing::TempDir("bench_serve");
    server_ = std::make_unique<ServeProcess>(bin_, model_, dir_ + "/serve.log");
    ASSERT_GT(server_->port(), 0) << "the server did not start:\n" << Slurp(dir_ + "/serve.log");
    url_ = "http://127.0.0.1:" + std::to_string(server_->port()) + "/v1";
  }

  std::string bin_, model_, dir_, url_;
  std::unique_ptr<ServeProcess> server_;
};

constexpr int kPrompts = 12;

void ExpectEveryRequestCompleted(const nlohmann::json& j, int prompts, bool exact_prompts) {
  EXPECT_EQ(j["completed"], prompts) << j["error_counts"].dump();
  EXPECT_EQ(j["failed"], 0);
  ASSERT_EQ(j["output_lens"].size(), static_cast<size_t>(prompts));
  long long want_output = 0;
  for (const auto& n : j["output_lens"]) {
    EXPECT_GE(n.get<int>(), 8);  // --random-output-len 16, range ratio 0.5: 8..24
    EXPECT_LE(n.get<int>(), 24);
    want_output += n.get<int>();
  }
  EXPECT_EQ(j["total_output_tokens"], want_output);
  if (exact_prompts) {
    for (const auto& n : j["input_lens"]) EXPECT_TRUE(n >= 16 && n <= 48) << n;
  }
  // Shape only: every figure is there and a number; those a completed run cannot have as 0
  // are positive (inter-token gaps can be 0 when a server sends tokens in one burst).
  for (const char* key :
       {"duration", "request_throughput", "output_throughput", "total_token_throughput",
        "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_e2el_ms", "p99_e2el_ms",
        "max_concurrent_requests", "mean_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_TRUE(j[key].is_number()) << key;
    const bool may_be_zero = std::string(key).find("tpot") != std::string::npos ||
                             std::string(key).find("itl") != std::string::npos;
    EXPECT_TRUE(may_be_zero ? j[key].get<double>() >= 0 : j[key].get<double>() > 0) << key;
  }
  EXPECT_LE(j["max_concurrent_requests"].get<int>(), 4);
  EXPECT_EQ(j["requests_without_usage"], 0);
}

const std::string kWorkload =
    " --num-prompts 12 --max-concurrency 4 --seed 3 --random-input-len 32 "
    "--random-output-len 16 --random-range-ratio 0.5";

TEST_F(BenchServeTest, TokenIdPromptsAllComplete) {
  const std::string result = dir_ + "/result.json";
  BenchRun r = RunBench(
      bin_,
      "--url " + url_ + kWorkload +
          " --request-rate 50 --vocab-size 256 -o json --save-detailed --result-file " + result,
      dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j, nlohmann::json::parse(Slurp(result)));
  EXPECT_EQ(j["model_id"], "stories260K");  // from /v1/models
  EXPECT_EQ(j["num_prompts"], kPrompts);
  ExpectEveryRequestCompleted(j, kPrompts, /*exact_prompts=*/true);
  EXPECT_NE(r.err.find("bench-serve: 12/12 done (0 failed)"), std::string::npos) << r.err;
  EXPECT_TRUE(server_->alive());
}

TEST_F(BenchServeTest, TextReportAllAtOnce) {
  BenchRun r =
      RunBench(bin_, "--url " + url_ + kWorkload + " --request-rate inf --vocab-size 256", dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* line :
       {"Serving Benchmark Result", "Successful requests:                     12",
        "Failed requests:                         0",
        "Mean TTFT (ms):", "P99 TPOT (ms):", "Median ITL (ms):", "P99 E2EL (ms):"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
}

TEST_F(BenchServeTest, TextPromptsThroughTokenize) {
  BenchRun r = RunBench(bin_,
                        "--url " + url_ + kWorkload +
                            " --request-rate inf --prompt-kind text -o json --save-detailed",
                        dir_);
  if (r.rc != 0 && r.err.find("no /tokenize") != std::string::npos) {
    GTEST_SKIP() << "this pagedinfer serve has no /tokenize yet: " << r.err;
  }
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ExpectEveryRequestCompleted(j, kPrompts, /*exact_prompts=*/false);
}

TEST(BenchServeCli, BadFlagsAreClearErrors) {
  const char* bin = std::getenv("PAGEDINFER_BIN");
  if (!bin || access(bin, X_OK) != 0) GTEST_SKIP() << "PAGEDINFER_BIN is not built";
  const std::string dir = testing::TempDir("bench_serve_cli");
  BenchRun r = RunBench(bin, "--url https://127.0.0.1:1/v1", dir);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("https is not supported"), std::string::npos) << r.err;
  r = RunBench(bin, "--request-rate fast", dir);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--request-rate 'fast'"), std::string::npos) << r.err;
  r = RunBench(bin, "--url http://127.0.0.1:1/v1 --model m --vocab-size 64 --num-prompts 2", dir);
  EXPECT_EQ(r.rc, 0) << r.err;  // nothing listens: both requests fail, and the run reports it
  EXPECT_NE(r.out.find("Failed requests:                         2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cannot connect"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pinfer
