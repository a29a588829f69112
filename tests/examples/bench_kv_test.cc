// bench-kv end to end on a small workload: the library (CompareKvLayouts and its JSON / SVG)
// and the `pagedinfer bench-kv` command ($PAGEDINFER_BIN, skipped when not built). Checks
// structure and the paged-vs-contiguous ordering, never timings.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "bench/kv_compare.h"
#include "bench/kv_plot.h"
#include "bench/kv_report.h"
#include "bench/workload.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/synth/synth.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

const std::string& TinyModelPath() {
  static const std::string path = [] {
    std::string p = testing::TempDir("bench_kv") + "/tiny-q4_0.gguf";
    EXPECT_TRUE(WriteSynthModel("tiny", "Q4_0", p, SynthOptions{}).ok());
    return p;
  }();
  return path;
}

constexpr int kRequests = 12;

WorkloadSpec SmallSpec() {
  WorkloadSpec s;
  s.requests = kRequests;
  s.min_len = 16;
  s.max_len = 64;
  s.seed = 7;
  return s;
}

EngineConfig SmallBenchConfig(const Model& m) {
  EngineConfig c;
  c.max_model_len = 256;
  c.max_num_seqs = 64;
  c.max_num_batched_tokens = 256;
  c.threads = 2;
  const ModelConfig& mc = m.config();
  const uint64_t per_token = 2ull * mc.n_layers * *KvRowBytes(c.kv_dtype, mc.kv_dim());
  c.kv_cache_memory = 3 * 256 * per_token + 1000;  // three max_model_len sequences, and a bit
  return c;
}

void ExpectLayoutKeys(const nlohmann::json& l) {
  for (const char* key :
       {"kv_utilization_mean", "kv_utilization_min", "kv_utilization_mean_all", "max_running",
        "requests_per_s", "output_tokens_per_s", "preemptions", "queue_wait_mean_s",
        "queue_wait_max_s", "queue_wait_mean_steps", "steps", "finished", "bytes_reserved",
        "prefill_tokens", "forwarded_tokens", "us_per_forwarded_token"}) {
    EXPECT_TRUE(l.contains(key)) << key;
  }
}

TEST(Workload, SeededAndWithinBounds) {
  auto a = *MakeWorkload(SmallSpec(), 256);
  auto b = *MakeWorkload(SmallSpec(), 256);
  ASSERT_EQ(a.size(), static_cast<size_t>(kRequests));
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt_len, b[i].prompt_len);
    EXPECT_EQ(a[i].output_len, b[i].output_len);
    EXPECT_GE(a[i].prompt_len, 16);
    EXPECT_LE(a[i].prompt_len, 64);
    EXPECT_GE(a[i].output_len, 16);
    EXPECT_LE(a[i].output_len, 64);
  }
  WorkloadSpec chat = SmallSpec();
  chat.dist = LengthDist::kChat;
  chat.requests = 500;
  chat.min_len = 1;
  chat.max_len = 2048;
  auto c = *MakeWorkload(chat, 4096);
  std::vector<int> prompts;
  for (const auto& r : c) prompts.push_back(r.prompt_len);
  std::nth_element(prompts.begin(), prompts.begin() + 250, prompts.end());
  EXPECT_GT(prompts[250], 150);  // median near 200
  EXPECT_LT(prompts[250], 260);
  EXPECT_FALSE(MakeWorkload(SmallSpec(), 100).ok());  // 64 + 64 > 100
  EXPECT_FALSE(ParseLengthDist("zipf").ok());
}

TEST(BenchKv, PagedHoldsMoreAndEveryRequestFinishes) {
  auto model = Model::Load(TinyModelPath());
  ASSERT_TRUE(model.ok()) << model.status();
  auto r = CompareKvLayouts(**model, SmallBenchConfig(**model), SmallSpec());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->paged.finished, kRequests);
  EXPECT_EQ(r->contiguous.finished, kRequests);
  EXPECT_EQ(r->paged.bytes_reserved, r->contiguous.bytes_reserved);  // one budget
  EXPECT_LE(r->contiguous.max_running, 3);
  EXPECT_GT(r->paged.max_running, r->contiguous.max_running);
  EXPECT_GT(r->paged.kv_utilization_mean, r->contiguous.kv_utilization_mean);
  EXPECT_LT(r->paged.steps, r->contiguous.steps);
  // Every prompt and output token goes through the model at least once (the first output
  // token comes from the prompt's last position).
  for (const LayoutResult* l : {&r->paged, &r->contiguous}) {
    EXPECT_GE(l->forwarded_tokens, r->prompt_tokens + r->output_tokens - kRequests);
  }

  nlohmann::json j = nlohmann::json::parse(KvBenchJson(*r));
  ASSERT_TRUE(j.contains("workload"));
  EXPECT_EQ(j["workload"]["requests"], kRequests);
  ExpectLayoutKeys(j["paged"]);
  ExpectLayoutKeys(j["contiguous"]);
  EXPECT_GT(j["paged"]["kv_utilization_mean"].get<double>(),
            j["contiguous"]["kv_utilization_mean"].get<double>());

  const std::string svg = KvBenchSvg(*r);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("paged"), std::string::npos);
  EXPECT_NE(svg.find("contiguous"), std::string::npos);
  EXPECT_NE(KvBenchMarkdown(*r).find("| | paged | contiguous |"), std::string::npos);
}

TEST(BenchKv, RunsOnTheBackendItIsGiven) {
  auto model = Model::Load(TinyModelPath());
  ASSERT_TRUE(model.ok()) << model.status();
  const EngineConfig c = SmallBenchConfig(**model);
  auto plain = CompareKvLayouts(**model, c, SmallSpec());
  ASSERT_TRUE(plain.ok()) << plain.status();
  int made = 0;
  BackendFactory make =
      [&](const EngineConfig& config) -> absl::StatusOr<std::unique_ptr<Backend>> {
    ++made;
    return std::unique_ptr<Backend>(
        new CpuBackend(**model, config.max_num_batched_tokens, config.threads));
  };
  auto given = CompareKvLayouts(**model, c, SmallSpec(), make);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(made, 2);  // one fresh backend per layout
  EXPECT_EQ(given->paged.steps, plain->paged.steps);
  EXPECT_EQ(given->contiguous.steps, plain->contiguous.steps);
  BackendFactory broken = [](const EngineConfig&) -> absl::StatusOr<std::unique_ptr<Backend>> {
    return absl::UnavailableError("no such device");
  };
  auto refused = CompareKvLayouts(**model, c, SmallSpec(), broken);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "no such device");
}

TEST(BenchKv, BudgetTooSmallIsAnError) {
  auto model = Model::Load(TinyModelPath());
  ASSERT_TRUE(model.ok());
  EngineConfig c = SmallBenchConfig(**model);
  c.kv_cache_memory = 1000;
  auto r = CompareKvLayouts(**model, c, SmallSpec());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot hold one max_model_len"), std::string::npos);
}

TEST(BenchKvCli, JsonAndPlot) {
  const char* bin = std::getenv("PAGEDINFER_BIN");
  if (bin == nullptr || !std::filesystem::exists(bin)) {
    GTEST_SKIP() << "pagedinfer binary not built ($PAGEDINFER_BIN unset or absent)";
  }
  const std::string svg_path = testing::TempDir("bench_kv_cli") + "/kv.svg";
  const std::string cmd = std::string(bin) + " bench-kv -m " + TinyModelPath() +
                          " --requests 8 --dist uniform --min 16 --max 48 --seed 3"
                          " --max-model-len 128 --kv-cache-memory 1MiB --max-num-seqs 64"
                          " --max-num-batched-tokens 256 -t 2 --device cpu -o json --plot " +
                          svg_path + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << out;
  ExpectLayoutKeys(j["paged"]);
  ExpectLayoutKeys(j["contiguous"]);
  EXPECT_EQ(j["paged"]["finished"], 8);
  EXPECT_EQ(j["contiguous"]["finished"], 8);
  EXPECT_EQ(j["workload"]["device"].get<std::string>().rfind("cpu", 0), 0u) << j["workload"];
  EXPECT_GT(j["paged"]["kv_utilization_mean"].get<double>(),
            j["contiguous"]["kv_utilization_mean"].get<double>());
  std::ifstream f(svg_path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string svg = ss.str();
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("paged"), std::string::npos);
  EXPECT_NE(svg.find("contiguous"), std::string::npos);
  // Bad input is a usage error, not a crash.
  EXPECT_NE(std::system((std::string(bin) + " bench-kv --dist zipf >/dev/null 2>&1").c_str()), 0);
}

}  // namespace
}  // namespace pinfer
