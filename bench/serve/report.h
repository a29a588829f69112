// bench-serve's results as vLLM's benchmark_serving prints them (a text block) and as JSON
// with its key names: date, label, backend, model_id, base_url, num_prompts, request_rate ("inf"
// or a number), max_concurrency (null: none), seed, dataset, duration, completed, failed,
// total_input_tokens, total_output_tokens, request_throughput, output_throughput,
// total_token_throughput, max_concurrent_requests, requests_without_usage, and for each of
// ttft, tpot, itl, e2el: mean_X_ms, median_X_ms, std_X_ms, pP_X_ms per percentile P;
// error_counts {message: count}; and with detailed (vLLM's --save-detailed), per request in
// workload order: input_lens, output_lens, ttfts, itls, start_times, errors ("" for a
// success). Times in seconds unless _ms.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/serve/stats.h"

namespace pinfer::bench_serve {

struct RunInfo {
  std::string date;     // ISO 8601, local time
  std::string backend;  // openai | openai-chat
  std::string label;    // names the server and its configuration in comparisons
  std::string model, base_url, dataset, prompt_kind;
  int num_prompts = 0;
  double request_rate = 0;  // +inf: all at once
  int max_concurrency = 0;  // 0: no cap
  uint64_t seed = 0;
  int peak_in_flight = 0;
};

std::string TextReport(const BenchMetrics& m, const RunInfo& info,
                       const std::vector<RequestResult>& results);
// Pretty-printed, ends with a newline.
std::string JsonReport(const BenchMetrics& m, const RunInfo& info,
                       const std::vector<RequestResult>& results, bool detailed);

// "99" for 99, "99.9" for 99.9: the P of pP_ttft_ms.
std::string PercentileName(double p);

}  // namespace pinfer::bench_serve
