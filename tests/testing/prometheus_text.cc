#include "tests/testing/prometheus_text.h"

#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>

namespace pinfer::testing {
namespace {

const std::regex kName("[a-zA-Z_:][a-zA-Z0-9_:]*");
const std::regex kLabel("[a-zA-Z_][a-zA-Z0-9_]*");

bool ParseValue(const std::string& s, double* v) {
  if (s == "+Inf" || s == "-Inf" || s == "NaN") {
    *v = s == "NaN" ? NAN : (s[0] == '+' ? INFINITY : -INFINITY);
    return true;
  }
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return !s.empty() && *end == '\0';
}

// name{a="x",b="y"} value
bool ParseSample(const std::string& line, PromSample* s, std::string* why) {
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
  s->name = line.substr(0, i);
  if (!std::regex_match(s->name, kName)) return *why = "bad metric name '" + s->name + "'", false;
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const size_t eq = line.find('=', i);
      if (eq == std::string::npos) return *why = "label without '='", false;
      const std::string key = line.substr(i, eq - i);
      if (!std::regex_match(key, kLabel)) return *why = "bad label name '" + key + "'", false;
      if (eq + 1 >= line.size() || line[eq + 1] != '"') return *why = "unquoted label value", false;
      std::string value;
      size_t j = eq + 2;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\') {
          if (++j >= line.size()) return *why = "dangling escape", false;
          if (line[j] != '\\' && line[j] != '"' && line[j] != 'n')
            return *why = "bad escape", false;
          value += line[j] == 'n' ? '\n' : line[j];
        } else {
          value += line[j];
        }
      }
      if (j >= line.size()) return *why = "unterminated label value", false;
      if (!s->labels.emplace(key, value).second) return *why = "label repeated: " + key, false;
      i = j + 1;
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) return *why = "unterminated label set", false;
    ++i;
  }
  if (i >= line.size() || line[i] != ' ') return *why = "no value", false;
  std::istringstream rest(line.substr(i + 1));
  std::string value, timestamp, extra;
  rest >> value >> timestamp >> extra;
  if (!extra.empty() || !ParseValue(value, &s->value)) return *why = "bad value", false;
  return true;
}

// The family a sample belongs to: its name, or for histograms the name before the suffix.
std::string FamilyOf(const std::string& sample, const std::map<std::string, PromFamily>& fams) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string sfx = suffix;
    if (sample.size() > sfx.size() &&
        sample.compare(sample.size() - sfx.size(), sfx.size(), sfx) == 0) {
      const std::string base = sample.substr(0, sample.size() - sfx.size());
      auto it = fams.find(base);
      if (it != fams.end() && (it->second.type == "histogram" || it->second.type == "summary")) {
        return base;
      }
    }
  }
  return sample;
}

bool CheckHistogram(const std::string& name, const PromFamily& f, std::string* why) {
  // Per label set (without le): buckets non-decreasing, +Inf == _count, a _sum.
  std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
  std::map<std::map<std::string, std::string>, double> counts;
  std::set<std::map<std::string, std::string>> sums;
  for (const PromSample& s : f.samples) {
    auto labels = s.labels;
    if (s.name == name + "_bucket") {
      double le;
      if (!labels.count("le") || !ParseValue(labels["le"], &le))
        return *why = "bucket without le", false;
      labels.erase("le");
      buckets[labels].push_back({le, s.value});
    } else if (s.name == name + "_count") {
      counts[labels] = s.value;
    } else if (s.name == name + "_sum") {
      sums.insert(labels);
    }
  }
  if (buckets.empty()) return *why = name + ": a histogram without buckets", false;
  for (const auto& [labels, bs] : buckets) {
    for (size_t i = 1; i < bs.size(); ++i) {
      if (bs[i].first <= bs[i - 1].first || bs[i].second < bs[i - 1].second) {
        return *why = name + ": buckets not increasing or not cumulative", false;
      }
    }
    if (!std::isinf(bs.back().first)) return *why = name + ": no +Inf bucket", false;
    if (!counts.count(labels) || counts[labels] != bs.back().second) {
      return *why = name + ": +Inf bucket differs from _count", false;
    }
    if (!sums.count(labels)) return *why = name + ": no _sum", false;
  }
  return true;
}

}  // namespace

bool ParsePrometheusText(const std::string& text, std::map<std::string, PromFamily>* families,
                         std::string* error) {
  std::istringstream in(text);
  std::string line, current;
  std::set<std::string> closed;  // families whose samples are over
  int n = 0;
  auto fail = [&](const std::string& why) {
    *error = "line " + std::to_string(n) + ": " + why + ": " + line;
    return false;
  };
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      if (!std::regex_match(name, kName)) return fail("bad metric name");
      static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                                   "untyped"};
      if (!kTypes.count(type)) return fail("bad type");
      if (families->count(name)) return fail("TYPE given twice");
      if (!current.empty()) closed.insert(current);
      (*families)[name].type = type;
      current = name;
      continue;
    }
    if (line[0] == '#') continue;  // HELP or a comment
    PromSample s;
    std::string why;
    if (!ParseSample(line, &s, &why)) return fail(why);
    const std::string fam = FamilyOf(s.name, *families);
    if (!families->count(fam)) return fail("a sample before its TYPE line");
    if (closed.count(fam) || fam != current) return fail("a family's samples are not together");
    (*families)[fam].samples.push_back(std::move(s));
  }
  for (const auto& [name, f] : *families) {
    if (f.type == "histogram" && !CheckHistogram(name, f, error)) return false;
  }
  return true;
}

}  // namespace pinfer::testing
