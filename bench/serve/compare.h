// Several bench-serve results side by side (servers x request rates): a Markdown table of
// the figures that matter for serving, the ratios of the first server to each other one at
// each rate, and an SVG plot (output tokens/s and p99 TTFT against the request rate, one
// line per server). Results are bench-serve's JSON (report.h); a server is its "label".
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pinfer::bench_serve {

struct RunPoint {
  std::string label;  // the server and its configuration
  double rate = 0;    // requests per second; +inf: all at once
  int completed = 0, failed = 0;
  double duration_s = 0, output_tps = 0, total_tps = 0;
  double mean_ttft_ms = 0, p99_ttft_ms = 0, mean_tpot_ms = 0, p99_itl_ms = 0, mean_e2el_ms = 0;
  int peak_in_flight = 0;
  std::string first_error;  // the most frequent error, "" when none failed
};

// From one result JSON (needs label, request_rate, completed, failed, duration,
// output_throughput, total_token_throughput, mean/p99 TTFT, mean TPOT, p99 ITL, mean E2EL).
absl::StatusOr<RunPoint> RunPointFromJson(const std::string& json_text);

// Rows in the order given; the ratio table compares the first label with each other one at
// the rates both ran.
std::string CompareMarkdown(const std::vector<RunPoint>& points);
// Two panels (output tokens/s; p99 TTFT in ms) over the rates, spaced evenly, inf last.
std::string CompareSvg(const std::vector<RunPoint>& points, const std::string& title);

}  // namespace pinfer::bench_serve
