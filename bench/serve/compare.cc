#include "bench/serve/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace pinfer::bench_serve {
namespace {

using json = nlohmann::json;

std::string RateName(double r) { return std::isinf(r) ? "inf" : absl::StrFormat("%g", r); }

std::vector<std::string> Labels(const std::vector<RunPoint>& points) {
  std::vector<std::string> out;
  for (const RunPoint& p : points) {
    if (std::find(out.begin(), out.end(), p.label) == out.end()) out.push_back(p.label);
  }
  return out;
}

std::vector<double> Rates(const std::vector<RunPoint>& points) {
  std::vector<double> out;
  for (const RunPoint& p : points) out.push_back(p.rate);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const RunPoint* Find(const std::vector<RunPoint>& points, const std::string& label, double rate) {
  for (const RunPoint& p : points) {
    if (p.label == label && p.rate == rate) return &p;
  }
  return nullptr;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

double NiceMax(double v) {
  if (!(v > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

}  // namespace

absl::StatusOr<RunPoint> RunPointFromJson(const std::string& json_text) {
  json j = json::parse(json_text, nullptr, false);
  if (!j.is_object()) return absl::InvalidArgumentError("not a bench-serve JSON result");
  RunPoint p;
  try {
    p.label = j.value("label", std::string());
    if (p.label.empty()) p.label = j.value("base_url", std::string("?"));
    const json& rate = j.at("request_rate");
    p.rate = rate.is_string() ? std::numeric_limits<double>::infinity() : rate.get<double>();
    p.completed = j.at("completed").get<int>();
    p.failed = j.at("failed").get<int>();
    p.duration_s = j.at("duration").get<double>();
    p.output_tps = j.at("output_throughput").get<double>();
    p.total_tps = j.at("total_token_throughput").get<double>();
    p.mean_ttft_ms = j.at("mean_ttft_ms").get<double>();
    p.p99_ttft_ms = j.at("p99_ttft_ms").get<double>();
    p.mean_tpot_ms = j.at("mean_tpot_ms").get<double>();
    p.p99_itl_ms = j.at("p99_itl_ms").get<double>();
    p.mean_e2el_ms = j.at("mean_e2el_ms").get<double>();
    p.peak_in_flight = j.value("max_concurrent_requests", 0);
    int most = 0;
    if (j.contains("error_counts") && j["error_counts"].is_object()) {
      for (auto it = j["error_counts"].begin(); it != j["error_counts"].end(); ++it) {
        if (it.value().get<int>() > most) most = it.value().get<int>(), p.first_error = it.key();
      }
    }
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("a bench-serve JSON result lacks a field (needs p99 among "
                     "--metric-percentiles): ",
                     e.what()));
  }
  return p;
}

std::string CompareMarkdown(const std::vector<RunPoint>& points) {
  std::string s =
      "| server | rate (req/s) | completed | failed | duration (s) | output tok/s | total tok/s "
      "| mean TTFT (ms) | p99 TTFT (ms) | mean TPOT (ms) | p99 ITL (ms) | mean E2EL (ms) | "
      "peak in flight |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const RunPoint& p : points) {
    absl::StrAppendFormat(&s,
                          "| %s | %s | %d | %d | %.1f | %.2f | %.2f | %.0f | %.0f | %.1f "
                          "| %.1f | %.0f | %d |\n",
                          p.label, RateName(p.rate), p.completed, p.failed, p.duration_s,
                          p.output_tps, p.total_tps, p.mean_ttft_ms, p.p99_ttft_ms, p.mean_tpot_ms,
                          p.p99_itl_ms, p.mean_e2el_ms, p.peak_in_flight);
  }
  const std::vector<std::string> labels = Labels(points);
  if (labels.size() < 2) return s;
  absl::StrAppend(&s, "\nRatios of ", labels[0],
                  " to each other server at the same rate (output tok/s: higher is better for ",
                  labels[0],
                  "; p99 TTFT: lower is):\n\n| against | rate (req/s) | output tok/s "
                  "ratio | p99 TTFT ratio | failed (",
                  labels[0],
                  " / other) |\n"
                  "|---|---:|---:|---:|---:|\n");
  for (size_t i = 1; i < labels.size(); ++i) {
    for (double rate : Rates(points)) {
      const RunPoint* a = Find(points, labels[0], rate);
      const RunPoint* b = Find(points, labels[i], rate);
      if (!a || !b) continue;
      auto ratio = [](double x, double y) {
        return y > 0 ? absl::StrFormat("%.2fx", x / y) : std::string("-");
      };
      absl::StrAppendFormat(&s, "| %s | %s | %s | %s | %d / %d |\n", labels[i], RateName(rate),
                            ratio(a->output_tps, b->output_tps),
                            ratio(a->p99_ttft_ms, b->p99_ttft_ms), a->failed, b->failed);
    }
  }
  return s;
}

namespace {

constexpr double kW = 900, kPanelW = 370, kH = 240, kTop = 60, kLeft = 70, kGap = 90;
constexpr const char* kColors[] = {"#d62728", "#1f77b4", "#2ca02c",
                                   "#9467bd", "#ff7f0e", "#8c564b"};

struct Metric {
  const char* name;
  double RunPoint::*field;
};

// One panel at x0: frame, value grid, rate ticks, a line per label.
void AppendPanel(std::string* s, const std::vector<RunPoint>& points, const Metric& metric,
                 double x0) {
  const std::vector<std::string> labels = Labels(points);
  const std::vector<double> rates = Rates(points);
  const double y1 = kTop + kH;
  double vmax = 0;
  for (const RunPoint& p : points) vmax = std::max(vmax, p.*(metric.field));
  vmax = NiceMax(vmax);
  auto X = [&](size_t i) {
    return rates.size() < 2 ? x0 + kPanelW / 2 : x0 + 20 + (kPanelW - 40) * i / (rates.size() - 1);
  };
  auto Y = [&](double v) { return y1 - kH * v / vmax; };
  absl::StrAppendFormat(s,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                        "fill=\"none\" stroke=\"#333\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
                        "font-size=\"13\" text-anchor=\"middle\">%s</text>\n",
                        x0, kTop, kPanelW, kH, x0 + kPanelW / 2, kTop - 8, metric.name);
  for (int t = 0; t <= 4; ++t) {
    const double v = vmax * t / 4;
    absl::StrAppendFormat(s,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                          "stroke=\"#ddd\"/>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                          "text-anchor=\"end\">%g</text>\n",
                          x0, Y(v), x0 + kPanelW, Y(v), x0 - 6, Y(v) + 4, v);
  }
  for (size_t i = 0; i < rates.size(); ++i) {
    absl::StrAppendFormat(s,
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                          "text-anchor=\"middle\">%s</text>\n",
                          X(i), y1 + 16, RateName(rates[i]));
  }
  absl::StrAppendFormat(s,
                        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
                        "text-anchor=\"middle\">request rate (req/s)</text>\n",
                        x0 + kPanelW / 2, y1 + 34);
  for (size_t l = 0; l < labels.size(); ++l) {
    std::string path;
    for (size_t i = 0; i < rates.size(); ++i) {
      const RunPoint* p = Find(points, labels[l], rates[i]);
      if (!p) continue;
      const double v = p->*(metric.field);
      absl::StrAppendFormat(&path, "%s%.1f,%.1f", path.empty() ? "" : " ", X(i), Y(v));
      absl::StrAppendFormat(s, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", X(i),
                            Y(v), kColors[l % 6]);
    }
    absl::StrAppendFormat(s,
                          "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" "
                          "stroke-width=\"2\"/>\n",
                          path, kColors[l % 6]);
  }
}

}  // namespace

std::string CompareSvg(const std::vector<RunPoint>& points, const std::string& title) {
  const std::vector<std::string> labels = Labels(points);
  const double legend_h = 18.0 * labels.size();
  std::string s = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.0f\" y=\"28\" font-size=\"15\" text-anchor=\"middle\">%s</text>\n",
      kW, kTop + kH + 60 + legend_h, kW / 2, Escape(title));
  const Metric metrics[] = {{"output tokens/s", &RunPoint::output_tps},
                            {"p99 TTFT (ms)", &RunPoint::p99_ttft_ms}};
  for (int m = 0; m < 2; ++m) AppendPanel(&s, points, metrics[m], kLeft + m * (kPanelW + kGap));
  for (size_t l = 0; l < labels.size(); ++l) {
    const double y = kTop + kH + 56 + 18.0 * l;
    absl::StrAppendFormat(&s,
                          "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"%s\" "
                          "stroke-width=\"3\"/>\n<text x=\"%.0f\" y=\"%.1f\" "
                          "font-size=\"12\">%s</text>\n",
                          kLeft, y - 4, kLeft + 24, y - 4, kColors[l % 6], kLeft + 32, y,
                          Escape(labels[l]));
  }
  return s + "</svg>\n";
}

}  // namespace pinfer::bench_serve
