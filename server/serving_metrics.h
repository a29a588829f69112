// The serving figures vLLM's dashboards read, recorded by the engine thread as requests
// arrive, get their first token, produce more and finish: latency histograms with vLLM's
// bucket bounds and per-request counters. Plain data; the EngineWorker guards it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pinfer::server {

// A Prometheus histogram: counts per upper bound (cumulative when written), sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  // counts()[i]: observations <= bounds()[i] and > bounds()[i - 1] (not cumulative).
  const std::vector<uint64_t>& counts() const { return counts_; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // one per bound; +Inf is count_
  uint64_t count_ = 0;
  double sum_ = 0;
};

struct ServingMetrics {
  ServingMetrics();
  // Seconds, with the bucket bounds vLLM uses for each.
  Histogram time_to_first_token, inter_token_latency, e2e_request_latency, request_queue_time;
  // Requests finished, by finish reason ("stop", "length", "abort"): vLLM's
  // request_success_total{finished_reason}.
  std::map<std::string, int64_t> finished_by_reason;
  int64_t cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
};

}  // namespace pinfer::server
