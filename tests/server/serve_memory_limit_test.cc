// Long conversations driven to the end of a small KV pool under a memory limit just above
// what the server holds after start (issue 15): every request is answered, queued or refused
// with a clear message, and the process is never killed. The pool is committed at start, so
// nothing grows after it: a pool that was only address space (as before) would be faulted in
// as the conversations grow, pass the limit and be killed by the kernel.
//
// The limit is a real memory cgroup where the test may make one (root with a writable cgroup
// file system); elsewhere (a container without the privilege) the same run checks the
// process's peak resident memory (VmHWM) against the same figure.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "engine/synth/synth.h"
#include "nlohmann/json.hpp"
#include "tests/server/http_client.h"
#include "tests/testing/cli_process.h"
#include "tests/testing/memory_limits.h"
#include "tests/testing/serve_process.h"
#include "tests/testing/test_models.h"

namespace pinfer::server {
namespace {

using json = nlohmann::json;
constexpr uint64_t kMiB = 1 << 20;
constexpr int kConversations = 12;  // -np 12 over a pool of 8 sequences: some must wait
constexpr int kMaxModelLen = 1024;

// "the process holds 52.30 MiB resident" in the start-up lines, in bytes (0 when absent).
uint64_t ResidentAtStart(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("the process holds ([0-9.]+) (MiB|GiB) resident"))) {
    return 0;
  }
  return static_cast<uint64_t>(std::stod(m[1]) * (m[2] == "GiB" ? 1024.0 : 1.0) * kMiB);
}

// VmHWM of a live process, in bytes (0 when unreadable).
uint64_t PeakResident(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  uint64_t kib = 0;
  while (in >> key) {
    if (key == "VmHWM:" && in >> kib) return kib * 1024;
  }
  return 0;
}

struct Outcome {
  std::atomic<int> answered{0}, refused{0}, failed{0};
  std::string first_failure, refusal;
  std::mutex mu;
};

// One conversation: each turn sends the whole transcript (token ids) and appends the reply's
// length and 40 new tokens, until the server refuses it for max_model_len.
void Converse(int port, int id, Outcome* out) {
  pinfer::testing::HttpClient client(port, std::chrono::seconds(300));
  std::vector<int> ids = {1};
  for (int turn = 0; turn < 64; ++turn) {
    for (int i = 0; i < 40; ++i) ids.push_back(3 + (id * 97 + turn * 31 + i * 7) % 500);
    const json body = {{"prompt", ids},
                       {"max_tokens", 24},
                       {"temperature", 0},
                       {"ignore_eos", true},
                       {"model", "tiny"}};
    const pinfer::testing::HttpReply r = client.Post("/v1/completions", body.dump());
    if (r.status == 200) {
      ++out->answered;
      const int got = json::parse(r.body)["usage"]["completion_tokens"].get<int>();
      for (int i = 0; i < got; ++i) ids.push_back(3 + (id + i) % 500);
      continue;
    }
    std::lock_guard<std::mutex> lock(out->mu);
    if (r.status == 400 && r.body.find("max_model_len") != std::string::npos) {
      ++out->refused;
      out->refusal = r.body;
    } else {
      ++out->failed;
      if (out->first_failure.empty()) {
        out->first_failure = std::to_string(r.status) + " " + r.body + r.error;
      }
    }
    return;
  }
}

TEST(ServeMemoryLimit, LongConversationsToTheEndOfASmallPoolAreNeverKilled) {
  const std::string bin = pinfer::testing::PagedinferBin();
  if (bin.empty()) GTEST_SKIP() << "PAGEDINFER_BIN is not set (ctest sets it)";
  const std::string model = pinfer::testing::TempDir("serve_memory") + "/tiny-q8_0.gguf";
  ASSERT_TRUE(WriteSynthModel("tiny", "Q8_0", model, SynthOptions{}).ok());
  // f32 KV: 4 KiB a token, 4 MiB a sequence of 1024; the pool holds 8 of them (32 MiB), far
  // more than the margin the limit leaves above the memory held after start.
  std::vector<std::string> argv = {bin,
                                   "serve",
                                   "-m",
                                   model,
                                   "--port",
                                   "0",
                                   "-c",
                                   std::to_string(kMaxModelLen),
                                   "-np",
                                   "12",
                                   "-b",
                                   "128",
                                   "-t",
                                   "2",
                                   "--kv-dtype",
                                   "f32",
                                   "--kv-cache-memory",
                                   "32MiB",
                                   "--reserve",
                                   "8MiB"};
  std::string why_no_cgroup;
  auto cgroup = pinfer::testing::MemoryCgroup::Create("pinfer-serve", 1ull << 30, &why_no_cgroup);
  pinfer::testing::ServeProcess serve(cgroup ? cgroup->Wrap(argv) : argv, "serve_memory");
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const uint64_t at_start = ResidentAtStart(serve.Log());
  ASSERT_GT(at_start, 32 * kMiB) << serve.Log();
  const uint64_t limit = at_start + 8 * kMiB;
  if (cgroup) {
    std::ofstream(cgroup->dir() + (cgroup->v2() ? "/memory.max" : "/memory.limit_in_bytes"))
        << limit;
  } else {
    std::cerr << "no memory cgroup (" << why_no_cgroup
              << "): checking the peak resident memory against the limit instead\n";
  }

  Outcome out;
  std::vector<std::thread> threads;
  for (int i = 0; i < kConversations; ++i) threads.emplace_back(Converse, serve.port(), i, &out);
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(out.failed, 0) << out.first_failure << "\n" << serve.Log();
  EXPECT_EQ(out.refused, kConversations) << "each conversation ends refused at max_model_len";
  EXPECT_GT(out.answered, kConversations * 10);
  EXPECT_NE(out.refusal.find("exceed max_model_len " + std::to_string(kMaxModelLen)),
            std::string::npos)
      << out.refusal;
  const std::string metrics = pinfer::testing::HttpClient(serve.port()).Get("/metrics").body;
  EXPECT_NE(metrics.find("pagedinfer_requests_accepted_total"), std::string::npos);
  const uint64_t peak = PeakResident(serve.pid());
  EXPECT_GT(peak, 0u);
  EXPECT_LE(peak, limit) << "the server grew past what it held after start";
  serve.Signal(SIGTERM);
  EXPECT_EQ(serve.Wait(60), 0) << "the server did not end cleanly (killed?)\n" << serve.Log();
  if (cgroup) {
    EXPECT_EQ(cgroup->OomKills(), 0);
    EXPECT_LE(cgroup->PeakBytes(), 1ull << 30);
  }
}

}  // namespace
}  // namespace pinfer::server
