#include "bench/serve/stats.h"

#include <algorithm>
#include <cmath>

namespace pinfer::bench_serve {

double Percentile(std::vector<double> xs, double p) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(xs.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, xs.size() - 1);
  return xs[lo] + (rank - static_cast<double>(lo)) * (xs[hi] - xs[lo]);
}

Summary Summarize(const std::vector<double>& seconds, const std::vector<double>& percentiles) {
  Summary s;
  s.percentiles.assign(percentiles.size(), 0.0);
  if (seconds.empty()) return s;
  double sum = 0;
  for (double x : seconds) sum += x;
  const double mean = sum / static_cast<double>(seconds.size());
  double var = 0;
  for (double x : seconds) var += (x - mean) * (x - mean);
  var /= static_cast<double>(seconds.size());  // population variance, as numpy's std
  s.mean = mean * 1e3;
  s.std = std::sqrt(var) * 1e3;
  s.median = Percentile(seconds, 50) * 1e3;
  for (size_t i = 0; i < percentiles.size(); ++i) {
    s.percentiles[i] = Percentile(seconds, percentiles[i]) * 1e3;
  }
  return s;
}

BenchMetrics ComputeMetrics(const std::vector<RequestResult>& results, double duration_s,
                            const std::vector<double>& percentiles) {
  BenchMetrics m;
  m.duration_s = duration_s;
  m.percentiles = percentiles;
  std::vector<double> ttfts, tpots, itls, e2els;
  for (const RequestResult& r : results) {
    if (!r.success) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    m.total_input_tokens += r.prompt_len;
    m.total_output_tokens += r.output_tokens;
    if (!r.usage_seen) ++m.requests_without_usage;
    if (r.output_tokens > 1) {
      tpots.push_back((r.latency_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1));
    }
    ttfts.push_back(r.ttft_s);
    e2els.push_back(r.latency_s);
    itls.insert(itls.end(), r.itl_s.begin(), r.itl_s.end());
  }
  if (duration_s > 0) {
    m.request_throughput = m.completed / duration_s;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / duration_s;
    m.total_token_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / duration_s;
  }
  m.ttft = Summarize(ttfts, percentiles);
  m.tpot = Summarize(tpots, percentiles);
  m.itl = Summarize(itls, percentiles);
  m.e2el = Summarize(e2els, percentiles);
  return m;
}

}  // namespace pinfer::bench_serve
