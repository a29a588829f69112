// `pagedinfer plan` end to end: runs the built binary ($PAGEDINFER_BIN, set by CTest) and
// compares its JSON with the library's ledger. Skips when the binary is not built.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/engine.h"
#include "engine/memory/memory_ledger.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pinfer {
namespace {

struct Result {
  int rc = -1;
  std::string out;
};

Result RunPlan(const std::string& flags) {
  const char* bin = std::getenv("PAGEDINFER_BIN");
  Result r;
  if (bin == nullptr || !std::filesystem::exists(bin)) return r;
  const std::string cmd = std::string(bin) + " plan " + flags + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

#define SKIP_WITHOUT_BINARY()                                                        \
  if (const char* b = std::getenv("PAGEDINFER_BIN");                                 \
      b == nullptr || !std::filesystem::exists(b)) {                                 \
    GTEST_SKIP() << "pagedinfer binary not built ($PAGEDINFER_BIN unset or absent)"; \
  }

nlohmann::json PlanJson(const std::string& flags, int want_rc = 0) {
  Result r = RunPlan(flags + " --json");
  EXPECT_EQ(r.rc, want_rc) << r.out;
  return nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

TEST(PlanCli, KvBytesPerTokenAndPool) {
  SKIP_WITHOUT_BINARY();
  nlohmann::json j = PlanJson("--shape llama2-7b --type Q4_0 --memory 16GiB --kv-dtype f16");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["kv_bytes_per_token"], 524288);
  const uint64_t w = j["weights_bytes"].get<uint64_t>();
  EXPECT_GT(w, 3'500'000'000u);
  EXPECT_LT(w, 3'900'000'000u);
  const uint64_t left =
      (16ull << 30) - w - j["workspace_bytes"].get<uint64_t>() - j["reserve_bytes"].get<uint64_t>();
  EXPECT_EQ(j["kv_pool_tokens"].get<uint64_t>(), left / (524288ull * 16) * 16);
  EXPECT_TRUE(j["fits"].get<bool>());

  EXPECT_EQ(
      PlanJson(
          "--shape llama2-7b --type Q4_0 --memory 16GiB --kv-dtype q8_0")["kv_bytes_per_token"],
      278528);
  EXPECT_EQ(
      PlanJson(
          "--shape mistral-7b --type Q4_0 --memory 16GiB --kv-dtype f16")["kv_bytes_per_token"],
      131072);
}

TEST(PlanCli, MatchesTheLibrary) {
  SKIP_WITHOUT_BINARY();
  PlanInput in = *PlanInputFromShape("qwen2-7b", "Q4_K_M");
  LedgerOptions o;
  o.host = false;  // plan's default --device cuda
  o.reserve_bytes = kDefaultDeviceReserveBytes;
  o.budget_bytes = 12ull << 30;
  o.kv_dtype = KvDtype::kQ8_0;
  o.max_model_len = 8192;
  MemoryLedger l = *ComputeLedger(in, o);
  nlohmann::json j = PlanJson(
      "--shape qwen2-7b --type q4_k_m --memory 12GiB --kv-dtype q8_0 --max-model-len 8192");
  EXPECT_EQ(j["kv_pool_bytes"].get<uint64_t>(), l.kv_pool_bytes);
  EXPECT_EQ(j["max_concurrency"].get<int64_t>(), l.max_concurrency);
}

TEST(PlanCli, NoFitSaysTheLongestThatFits) {
  SKIP_WITHOUT_BINARY();
  nlohmann::json j =
      PlanJson("--shape mistral-7b --type Q4_K_M --memory 6GiB --max-model-len 32768", 1);
  EXPECT_FALSE(j["fits"].get<bool>());
  const std::string longest = std::to_string(j["max_model_len_fit"].get<int64_t>());
  EXPECT_NE(j["message"].get<std::string>().find("longest max_model_len that fits is " + longest),
            std::string::npos);
}

TEST(PlanCli, ReserveDefaultFollowsTheDevice) {
  SKIP_WITHOUT_BINARY();
  const std::string base = "--shape tiny --type Q4_0 --memory 4GiB";
  EXPECT_EQ(PlanJson(base)["reserve_bytes"].get<uint64_t>(), 1ull << 30);
  EXPECT_EQ(PlanJson(base + " --device cpu")["reserve_bytes"].get<uint64_t>(),
            EngineConfig{}.reserve_bytes);
  EXPECT_EQ(PlanJson(base + " --device cpu --reserve 2MiB")["reserve_bytes"].get<uint64_t>(),
            2ull << 20);
  Result bad = RunPlan(base + " --device tpu");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.out.find("--device"), std::string::npos);
}

// plan takes the engine's flags through the same registration as run and serve: their
// aliases (-np / --parallel / --max-num-seqs, -c / --ctx-size) and --kv-layout.
TEST(PlanCli, TakesTheEnginesFlags) {
  SKIP_WITHOUT_BINARY();
  const std::string base = "--shape tiny --type Q4_0 --memory 4GiB --device cpu";
  const nlohmann::json np = PlanJson(base + " -np 3 -c 256");
  EXPECT_EQ(np["max_num_seqs"], 3);
  EXPECT_EQ(np["max_model_len"], 256);
  const nlohmann::json parallel = PlanJson(base + " --parallel 3 --ctx-size 256");
  EXPECT_EQ(parallel["max_num_seqs"], 3);
  EXPECT_EQ(parallel["kv_pool_bytes"], np["kv_pool_bytes"]);
  EXPECT_EQ(parallel["workspace_bytes"], np["workspace_bytes"]);
  const nlohmann::json contiguous = PlanJson(base + " -np 3 -c 256 --kv-layout contiguous");
  EXPECT_EQ(contiguous["kv_layout"], "contiguous");
  EXPECT_EQ(contiguous["block_size"], 256);  // a block is a whole sequence
  EXPECT_EQ(contiguous["kv_pool_blocks"], 3);
}

TEST(PlanCli, UsageErrors) {
  SKIP_WITHOUT_BINARY();
  Result no_memory = RunPlan("--shape tiny");
  EXPECT_EQ(no_memory.rc, 2);
  EXPECT_NE(no_memory.out.find("--memory"), std::string::npos);
  EXPECT_EQ(RunPlan("--shape nope --memory 1GiB").rc, 2);
  EXPECT_EQ(RunPlan("--shape tiny --memory lots").rc, 2);
}

}  // namespace
}  // namespace pinfer
