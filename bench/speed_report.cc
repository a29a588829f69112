// SpeedMarkdown and SpeedJson (declared in speed.h).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/speed.h"
#include "engine/memory/memory_ledger.h"
#include "nlohmann/json.hpp"

namespace pinfer {
namespace {

// llama-bench prints sizes in GiB and parameters in B (10^9).
std::string Size(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return absl::StrFormat("%.2f GiB", bytes / 1073741824.0);
  return absl::StrFormat("%.2f MiB", bytes / 1048576.0);
}

std::string Params(uint64_t n) {
  if (n >= 1'000'000'000) return absl::StrFormat("%.2f B", n / 1e9);
  return absl::StrFormat("%.2f M", n / 1e6);
}

}  // namespace

std::string SpeedMarkdown(const SpeedResult& r) {
  std::string out =
      "| model | size | params | backend | threads | test | t/s |\n"
      "| ------------------------------ | ---------: | ---------: | ---------- | ------: | "
      "------------: | -------------------: |\n";
  for (const SpeedTest& t : r.tests) {
    absl::StrAppendFormat(&out, "| %-30s | %10s | %10s | %-10s | %7d | %13s | %20s |\n",
                          r.model.label, Size(r.model.size_bytes), Params(r.model.n_params),
                          r.backend, r.threads, t.name,
                          absl::StrFormat("%.2f ± %.2f", t.mean_ts, t.stddev_ts));
  }
  absl::StrAppendFormat(&out,
                        "\nKV cache: %s, %s. Read bandwidth (%d threads summing 512 MiB): %.1f "
                        "GB/s; memcpy bandwidth (read + write): %.1f GB/s\n",
                        r.kv_dtype, r.kv_layout, r.threads, r.read_gbps, r.copy_gbps);
  absl::StrAppendFormat(
      &out,
      "CPU kernels: %s (PAGEDINFER_KERNELS=scalar|avx2|avxvnni|avx512vnni|neon forces a set)%s\n",
      r.cpu_kernels, r.cpu_weights.empty() ? "" : absl::StrCat("; weights: ", r.cpu_weights));
  for (const SpeedTest& t : r.tests) {
    if (t.n_gen == 0) continue;
    absl::StrAppendFormat(
        &out,
        "%s: %.2f ms/token; reads %s/token (weights %s + KV of the mean context); achieved "
        "%.2f GB/s = %.0f%% of the read bandwidth\n",
        t.name, 1000.0 / t.mean_ts, FormatBytes(t.bytes_per_token),
        FormatBytes(r.model.decode_weight_bytes), t.achieved_gbps,
        r.read_gbps > 0 ? 100.0 * t.achieved_gbps / r.read_gbps : 0.0);
  }
  return out;
}

std::string SpeedJson(const SpeedResult& r) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const SpeedTest& t : r.tests) {
    nlohmann::ordered_json j;
    j["model_type"] = r.model.label;
    j["model_size"] = r.model.size_bytes;
    j["model_n_params"] = r.model.n_params;
    j["backend"] = r.backend;
    j["n_threads"] = r.threads;
    j["type_k"] = r.kv_dtype;
    j["kv_layout"] = r.kv_layout;
    j["test"] = t.name;
    j["n_prompt"] = t.n_prompt;
    j["n_gen"] = t.n_gen;
    j["n_depth"] = t.n_depth;
    j["avg_ts"] = t.mean_ts;
    j["stddev_ts"] = t.stddev_ts;
    j["samples_ts"] = t.samples_ts;
    j["bytes_per_token"] = t.bytes_per_token;
    j["achieved_gbps"] = t.achieved_gbps;
    j["copy_gbps"] = r.copy_gbps;
    j["read_gbps"] = r.read_gbps;
    j["cpu_kernels"] = r.cpu_kernels;
    j["cpu_weights"] = r.cpu_weights;
    arr.push_back(j);
  }
  return arr.dump(2) + "\n";
}

}  // namespace pinfer
