#include "bench/serve/report.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace pinfer::bench_serve {
namespace {

using json = nlohmann::json;

struct MetricName {
  const char* key;    // ttft
  const char* label;  // TTFT
  const char* title;  // Time to First Token
  const Summary BenchMetrics::*summary;
};
constexpr MetricName kMetrics[] = {
    {"ttft", "TTFT", "Time to First Token", &BenchMetrics::ttft},
    {"tpot", "TPOT", "Time per Output Token (excl. 1st token)", &BenchMetrics::tpot},
    {"itl", "ITL", "Inter-token Latency", &BenchMetrics::itl},
    {"e2el", "E2EL", "End-to-end Latency", &BenchMetrics::e2el},
};

std::string Rule(const std::string& title, char fill) {
  const int width = 50, left = (width - static_cast<int>(title.size())) / 2;
  std::string s(std::max(0, left), fill);
  s += title;
  s.append(std::max(0, width - static_cast<int>(s.size())), fill);
  return s + "\n";
}

std::string Row(const std::string& name, const std::string& value) {
  return absl::StrFormat("%-40s %s\n", name, value);
}
std::string Num(double v) { return absl::StrFormat("%.2f", v); }

std::map<std::string, int> ErrorCounts(const std::vector<RequestResult>& results) {
  std::map<std::string, int> counts;
  for (const RequestResult& r : results) {
    if (!r.success) ++counts[r.error];
  }
  return counts;
}

}  // namespace

std::string PercentileName(double p) {
  if (p == std::floor(p)) return absl::StrCat(static_cast<int64_t>(p));
  return absl::StrFormat("%g", p);
}

std::string TextReport(const BenchMetrics& m, const RunInfo& info,
                       const std::vector<RequestResult>& results) {
  std::string s = Rule(" Serving Benchmark Result ", '=');
  s += Row("Successful requests:", absl::StrCat(m.completed));
  s += Row("Failed requests:", absl::StrCat(m.failed));
  s += Row("Request rate configured (RPS):",
           std::isinf(info.request_rate) ? "inf" : Num(info.request_rate));
  if (info.max_concurrency > 0) {
    s += Row("Maximum request concurrency:", absl::StrCat(info.max_concurrency));
  }
  s += Row("Benchmark duration (s):", Num(m.duration_s));
  s += Row("Total input tokens:", absl::StrCat(m.total_input_tokens));
  s += Row("Total generated tokens:", absl::StrCat(m.total_output_tokens));
  s += Row("Request throughput (req/s):", Num(m.request_throughput));
  s += Row("Output token throughput (tok/s):", Num(m.output_throughput));
  s += Row("Total Token throughput (tok/s):", Num(m.total_token_throughput));
  s += Row("Peak concurrent requests:", absl::StrCat(info.peak_in_flight));
  for (const MetricName& n : kMetrics) {
    const Summary& sm = m.*(n.summary);
    s += Rule(n.title, '-');
    s += Row(absl::StrCat("Mean ", n.label, " (ms):"), Num(sm.mean));
    s += Row(absl::StrCat("Median ", n.label, " (ms):"), Num(sm.median));
    for (size_t i = 0; i < m.percentiles.size(); ++i) {
      s += Row(absl::StrCat("P", PercentileName(m.percentiles[i]), " ", n.label, " (ms):"),
               Num(sm.percentiles[i]));
    }
  }
  s += std::string(50, '=') + "\n";
  if (m.requests_without_usage > 0) {
    s += absl::StrCat("note: ", m.requests_without_usage,
                      " requests streamed no usage; their output tokens are the text chunks\n");
  }
  for (const auto& [error, count] : ErrorCounts(results)) {
    s += absl::StrCat("failed: ", count, " x ", error, "\n");
  }
  return s;
}

std::string JsonReport(const BenchMetrics& m, const RunInfo& info,
                       const std::vector<RequestResult>& results, bool detailed) {
  json j = {{"date", info.date},
            {"label", info.label},
            {"backend", info.backend},
            {"model_id", info.model},
            {"base_url", info.base_url},
            {"dataset", info.dataset},
            {"prompt_kind", info.prompt_kind},
            {"num_prompts", info.num_prompts},
            {"seed", info.seed},
            {"duration", m.duration_s},
            {"completed", m.completed},
            {"failed", m.failed},
            {"total_input_tokens", m.total_input_tokens},
            {"total_output_tokens", m.total_output_tokens},
            {"request_throughput", m.request_throughput},
            {"output_throughput", m.output_throughput},
            {"total_token_throughput", m.total_token_throughput},
            {"max_concurrent_requests", info.peak_in_flight},
            {"requests_without_usage", m.requests_without_usage}};
  j["request_rate"] = std::isinf(info.request_rate) ? json("inf") : json(info.request_rate);
  j["max_concurrency"] = info.max_concurrency > 0 ? json(info.max_concurrency) : json();
  for (const MetricName& n : kMetrics) {
    const Summary& sm = m.*(n.summary);
    j[absl::StrCat("mean_", n.key, "_ms")] = sm.mean;
    j[absl::StrCat("median_", n.key, "_ms")] = sm.median;
    j[absl::StrCat("std_", n.key, "_ms")] = sm.std;
    for (size_t i = 0; i < m.percentiles.size(); ++i) {
      j[absl::StrCat("p", PercentileName(m.percentiles[i]), "_", n.key, "_ms")] = sm.percentiles[i];
    }
  }
  j["error_counts"] = ErrorCounts(results);
  if (!detailed) return j.dump(2) + "\n";
  json input_lens = json::array(), output_lens = json::array(), ttfts = json::array(),
       itls = json::array(), starts = json::array(), errors = json::array();
  for (const RequestResult& r : results) {
    input_lens.push_back(r.prompt_len);
    output_lens.push_back(r.output_tokens);
    ttfts.push_back(r.success ? r.ttft_s : 0.0);
    itls.push_back(r.itl_s);
    starts.push_back(r.start_s);
    errors.push_back(r.error);
  }
  j["input_lens"] = input_lens;
  j["output_lens"] = output_lens;
  j["ttfts"] = ttfts;
  j["itls"] = itls;
  j["start_times"] = starts;
  j["errors"] = errors;
  return j.dump(2) + "\n";
}

}  // namespace pinfer::bench_serve
