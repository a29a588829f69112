#include "bench/serve/workload.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pinfer::bench_serve {

uint64_t Rng::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

int64_t Rng::Between(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<int64_t>(Next());  // the whole range
  // Multiply-shift: unbiased enough for spans far below 2^64.
  const unsigned __int128 wide = static_cast<unsigned __int128>(Next()) * span;
  return lo + static_cast<int64_t>(wide >> 64);
}

double Rng::Exponential(double rate) { return -std::log1p(-Uniform()) / rate; }

uint64_t SubSeed(uint64_t seed, uint64_t stream, uint64_t index) {
  Rng r(seed ^ (stream * 0xd1342543de82ef95ull));
  for (uint64_t i = 0; i < 2; ++i) r.Next();
  return r.Next() ^ (index * 0x9e3779b97f4a7c15ull);
}

absl::StatusOr<std::vector<LengthPair>> RandomLengthPairs(const RandomLengths& spec, int num,
                                                          uint64_t seed) {
  if (num < 1) return absl::InvalidArgumentError("--num-prompts must be at least 1");
  if (spec.input_len < 1 || spec.output_len < 1) {
    return absl::InvalidArgumentError(
        "--random-input-len and --random-output-len must be at least 1");
  }
  if (!(spec.range_ratio >= 0 && spec.range_ratio < 1)) {
    return absl::InvalidArgumentError("--random-range-ratio must be in [0, 1)");
  }
  auto bounds = [&](int len) {
    const int64_t lo = std::max<int64_t>(1, std::floor(len * (1 - spec.range_ratio)));
    const int64_t hi = std::max<int64_t>(lo, std::ceil(len * (1 + spec.range_ratio)));
    return std::pair(lo, hi);
  };
  const auto [in_lo, in_hi] = bounds(spec.input_len);
  const auto [out_lo, out_hi] = bounds(spec.output_len);
  Rng rng(SubSeed(seed, 1));
  std::vector<LengthPair> out(num);
  for (LengthPair& p : out) {
    p.prompt_len = static_cast<int>(rng.Between(in_lo, in_hi));
    p.output_len = static_cast<int>(rng.Between(out_lo, out_hi));
  }
  return out;
}

absl::StatusOr<std::vector<LengthPair>> ParseLengthPairs(const std::string& text) {
  std::vector<LengthPair> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t,"), absl::SkipEmpty());
    LengthPair p;
    if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &p.prompt_len) ||
        !absl::SimpleAtoi(fields[1], &p.output_len) || p.prompt_len < 1 || p.output_len < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, " ('", line,
                       "'): expected two positive integers, PROMPT_LEN OUTPUT_LEN"));
    }
    out.push_back(p);
  }
  if (out.empty()) return absl::InvalidArgumentError("no length pairs (PROMPT_LEN OUTPUT_LEN)");
  return out;
}

absl::StatusOr<std::vector<LengthPair>> LengthPairsFromFile(const std::string& path, int num) {
  if (num < 1) return absl::InvalidArgumentError("--num-prompts must be at least 1");
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read the lengths file ", path));
  std::stringstream ss;
  ss << f.rdbuf();
  auto pairs = ParseLengthPairs(ss.str());
  if (!pairs.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", pairs.status().message()));
  }
  std::vector<LengthPair> out(num);
  for (int i = 0; i < num; ++i) out[i] = (*pairs)[i % pairs->size()];
  return out;
}

std::vector<double> PoissonArrivals(int num, double rate, uint64_t seed) {
  std::vector<double> out(std::max(num, 0), 0.0);
  if (!(rate > 0) || std::isinf(rate)) return out;
  Rng rng(SubSeed(seed, 2));
  for (int i = 1; i < num; ++i) out[i] = out[i - 1] + rng.Exponential(rate);
  return out;
}

absl::StatusOr<double> ParseRequestRate(const std::string& text) {
  if (text == "inf" || text == "infinity") return std::numeric_limits<double>::infinity();
  double r = 0;
  if (!absl::SimpleAtod(text, &r) || !(r > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--request-rate '", text, "': expected requests per second (> 0) or inf"));
  }
  return r;
}

absl::StatusOr<std::vector<double>> ParsePercentiles(const std::string& text) {
  std::vector<double> out;
  for (absl::string_view f : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double p = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(f), &p) || !(p > 0 && p <= 100)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--metric-percentiles '", text, "': expected numbers in (0, 100], e.g. 50,90,99"));
    }
    out.push_back(p);
  }
  if (out.empty()) return absl::InvalidArgumentError("--metric-percentiles is empty");
  return out;
}

}  // namespace pinfer::bench_serve
