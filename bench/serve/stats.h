// What one benchmark request measured, and the serving metrics vLLM's benchmark_serving
// reports over a run: throughputs, and the mean, median, standard deviation and chosen
// percentiles of time to first token (TTFT), time per output token after the first (TPOT),
// inter-token latency (ITL) and end-to-end latency (E2EL). Failed requests count only as
// failed: every latency and token figure is over the successful ones, as vLLM computes them.
#pragma once

#include <string>
#include <vector>

namespace pinfer::bench_serve {

struct RequestResult {
  bool success = false;
  std::string error;          // why it failed ("" when it succeeded)
  int prompt_len = 0;         // the workload's prompt tokens
  int output_tokens = 0;      // usage.completion_tokens, else the token chunks streamed
  bool usage_seen = false;    // the server reported usage (otherwise output_tokens is chunks)
  int chunks = 0;             // stream events that carried text
  double start_s = 0;         // when it was sent, seconds from the run's start
  double ttft_s = 0;          // first text chunk, from start_s
  double latency_s = 0;       // the whole response, from start_s
  std::vector<double> itl_s;  // gaps between consecutive text chunks
};

// Percentile of xs by linear interpolation between closest ranks (numpy's default, which
// vLLM uses): rank p/100 * (n-1). 0 for an empty xs. p in [0, 100].
double Percentile(std::vector<double> xs, double p);

struct Summary {  // in milliseconds
  double mean = 0, median = 0, std = 0;
  std::vector<double> percentiles;  // one per BenchMetrics::percentiles entry
};
Summary Summarize(const std::vector<double>& seconds, const std::vector<double>& percentiles);

struct BenchMetrics {
  int completed = 0, failed = 0;
  double duration_s = 0;
  long long total_input_tokens = 0, total_output_tokens = 0;
  double request_throughput = 0;      // completed / duration
  double output_throughput = 0;       // output tokens / duration
  double total_token_throughput = 0;  // (input + output tokens) / duration
  int requests_without_usage = 0;     // output tokens counted as chunks
  std::vector<double> percentiles;    // e.g. {99}
  Summary ttft, tpot, itl, e2el;
};

// TPOT of a request = (latency - ttft) / (output_tokens - 1), for output_tokens > 1.
BenchMetrics ComputeMetrics(const std::vector<RequestResult>& results, double duration_s,
                            const std::vector<double>& percentiles);

}  // namespace pinfer::bench_serve
