// A small parser of the Prometheus text exposition format (0.0.4) for the server tests: it
// checks the format's rules as it reads (HELP/TYPE lines, metric and label names, quoted and
// escaped label values, numbers, a family's samples together after its TYPE, histograms'
// cumulative buckets ending in +Inf equal to _count, and _sum) and returns the samples.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace pinfer::testing {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromFamily {
  std::string type;  // counter, gauge, histogram, summary, untyped
  std::vector<PromSample> samples;
};

// Parses text; on the first broken rule returns false with *error saying which line and why.
bool ParsePrometheusText(const std::string& text, std::map<std::string, PromFamily>* families,
                         std::string* error);

}  // namespace pinfer::testing
