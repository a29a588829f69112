#include "bench/kv_plot.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/memory/memory_ledger.h"

namespace pinfer {
namespace {

constexpr double kWidth = 900, kLeft = 70, kRight = 20, kPanelH = 210, kGap = 60, kTop = 70;
constexpr int kMaxPoints = 1200;  // per line: longer runs are decimated

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A "nice" tick step giving about `n` ticks over [0, max].
double TickStep(double max, int n) {
  const double raw = std::max(max, 1e-9) / n;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

struct Panel {
  double top;    // pixel y of the panel's top edge
  double y_max;  // value at the top edge
  std::string y_label;
};

class Plot {
 public:
  Plot(double x_max) : x_max_(std::max(1.0, x_max)) {}
  double X(double step) const { return kLeft + (kWidth - kLeft - kRight) * step / x_max_; }
  static double Y(const Panel& p, double v) { return p.top + kPanelH * (1.0 - v / p.y_max); }

  void Axes(const Panel& p, bool percent) {
    const double x0 = kLeft, x1 = kWidth - kRight, y1 = p.top + kPanelH;
    const double ys = TickStep(p.y_max, 5);
    for (double v = 0; v <= p.y_max + 1e-9; v += ys) {
      const double y = Y(p, v);
      absl::StrAppendFormat(&svg_,
                            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                            "stroke=\"#ddd\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
                            "text-anchor=\"end\" font-size=\"11\">%s</text>\n",
                            x0, y, x1, y, x0 - 6, y + 4,
                            percent ? absl::StrFormat("%.0f%%", v) : absl::StrFormat("%g", v));
    }
    const double xs = TickStep(x_max_, 8);
    for (double v = 0; v <= x_max_ + 1e-9; v += xs) {
      absl::StrAppendFormat(&svg_,
                            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                            "stroke=\"#333\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
                            "text-anchor=\"middle\" font-size=\"11\">%g</text>\n",
                            X(v), y1, X(v), y1 + 5, X(v), y1 + 18, v);
    }
    absl::StrAppendFormat(&svg_,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                          "fill=\"none\" stroke=\"#333\"/>\n",
                          x0, p.top, x1 - x0, kPanelH);
    absl::StrAppendFormat(&svg_,
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
                          "transform=\"rotate(-90 %.1f %.1f)\" text-anchor=\"middle\">%s</text>\n",
                          18.0, p.top + kPanelH / 2, 18.0, p.top + kPanelH / 2, Escape(p.y_label));
    absl::StrAppendFormat(&svg_,
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
                          "text-anchor=\"middle\">engine step</text>\n",
                          (x0 + x1) / 2, y1 + 34);
  }

  template <typename Fn>
  void Line(const Panel& p, const LayoutResult& r, const char* color, Fn value) {
    if (r.samples.empty()) return;
    const size_t n = r.samples.size();
    const size_t stride = std::max<size_t>(1, (n + kMaxPoints - 1) / kMaxPoints);
    std::string pts;
    for (size_t i = 0; i < n; i += stride) {
      absl::StrAppendFormat(&pts, "%.1f,%.1f ", X(static_cast<double>(i + 1)),
                            Y(p, value(r.samples[i])));
    }
    absl::StrAppendFormat(&svg_,
                          "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                          "points=\"%s\"><title>%s</title></polyline>\n",
                          color, pts, r.layout);
  }

  std::string svg_;

 private:
  double x_max_;
};

}  // namespace

std::string KvBenchSvg(const KvBenchResult& r) {
  const double height = kTop + 2 * kPanelH + kGap + 50;
  const double x_max =
      static_cast<double>(std::max(r.paged.samples.size(), r.contiguous.samples.size()));
  int run_max = std::max(r.paged.max_running, r.contiguous.max_running);
  Plot plot(x_max);
  std::string& s = plot.svg_;
  absl::StrAppendFormat(&s,
                        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                        "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
                        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                        kWidth, height, kWidth, height);
  absl::StrAppendFormat(
      &s, "<text x=\"%.1f\" y=\"22\" font-size=\"15\" font-weight=\"bold\">%s</text>\n", kLeft,
      Escape(absl::StrFormat("KV cache occupancy: paged vs contiguous, max_model_len %d, %s KV "
                             "budget",
                             r.max_model_len, FormatBytes(r.kv_cache_memory))));
  absl::StrAppendFormat(&s, "<text x=\"%.1f\" y=\"40\" font-size=\"11\">%s</text>\n", kLeft,
                        Escape(DescribeWorkload(r.spec)));
  const char* kPaged = "#1f77b4";
  const char* kContig = "#d62728";
  // Legend.
  double lx = kLeft;
  for (const auto& [name, color, l] :
       {std::tuple{"paged", kPaged, &r.paged}, std::tuple{"contiguous", kContig, &r.contiguous}}) {
    absl::StrAppendFormat(&s,
                          "<line x1=\"%.1f\" y1=\"56\" x2=\"%.1f\" y2=\"56\" stroke=\"%s\" "
                          "stroke-width=\"3\"/><text x=\"%.1f\" y=\"60\" font-size=\"12\">%s "
                          "(mean %.0f%%, max %d running)</text>\n",
                          lx, lx + 20, color, lx + 25, name, 100 * l->kv_utilization_mean,
                          l->max_running);
    lx += 300;
  }
  const Panel util{kTop, 100.0, "KV utilization (% of reserved bytes)"};
  const Panel run{kTop + kPanelH + kGap,
                  std::max(1.0, TickStep(run_max, 5) * std::ceil(run_max / TickStep(run_max, 5))),
                  "sequences running"};
  plot.Axes(util, true);
  plot.Axes(run, false);
  auto u = [](const StepSample& x) { return 100.0 * x.utilization; };
  auto n = [](const StepSample& x) { return static_cast<double>(x.running); };
  plot.Line(util, r.contiguous, kContig, u);
  plot.Line(util, r.paged, kPaged, u);
  plot.Line(run, r.contiguous, kContig, n);
  plot.Line(run, r.paged, kPaged, n);
  s += "</svg>\n";
  return s;
}

}  // namespace pinfer
