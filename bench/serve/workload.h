// The seeded workload of a serving benchmark: each request's prompt and output length and
// its arrival time. Lengths are uniform around a mean (vLLM's random dataset: integers in
// [L*(1-r), L*(1+r)]) or read as pairs from a file; arrivals are a Poisson process at a
// request rate (exponential gaps, the first at 0) or all at once (rate inf). The generator
// and its transforms are written out here, so a seed gives the same workload everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pinfer::bench_serve {

// splitmix64: small, seedable, the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  double Uniform();                         // [0, 1)
  int64_t Between(int64_t lo, int64_t hi);  // [lo, hi], lo <= hi
  double Exponential(double rate);          // mean 1 / rate

 private:
  uint64_t state_;
};

// An independent stream for one purpose (lengths, arrivals, prompt i) of one seed.
uint64_t SubSeed(uint64_t seed, uint64_t stream, uint64_t index = 0);

struct LengthPair {
  int prompt_len = 0;
  int output_len = 0;
};

struct RandomLengths {
  int input_len = 1024, output_len = 128;  // vLLM's --random-input-len / --random-output-len
  double range_ratio = 0.0;                // --random-range-ratio, in [0, 1)
};

// num lengths drawn uniformly; prompt lengths at least 1, output lengths at least 1.
absl::StatusOr<std::vector<LengthPair>> RandomLengthPairs(const RandomLengths& spec, int num,
                                                          uint64_t seed);

// "PROMPT_LEN OUTPUT_LEN" per line (space, tab or comma between), '#' comments, blank lines
// skipped. InvalidArgument naming the line for anything else.
absl::StatusOr<std::vector<LengthPair>> ParseLengthPairs(const std::string& text);
// The first num pairs of a file, cycling through it when it has fewer.
absl::StatusOr<std::vector<LengthPair>> LengthPairsFromFile(const std::string& path, int num);

// Arrival times in seconds from the start: rate <= 0 or infinite: all 0.
std::vector<double> PoissonArrivals(int num, double rate, uint64_t seed);

// "inf" (or "infinity") -> +infinity, else a positive number.
absl::StatusOr<double> ParseRequestRate(const std::string& text);

// "99" or "50,90,99" -> {50, 90, 99}: each in (0, 100].
absl::StatusOr<std::vector<double>> ParsePercentiles(const std::string& text);

}  // namespace pinfer::bench_serve
