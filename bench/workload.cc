#include "bench/workload.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

// splitmix64: tiny, seedable and identical everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform01() { return (Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int Int(int lo, int hi) {                                  // [lo, hi]
    return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  double Normal() {  // Box-Muller
    const double u1 = 1.0 - Uniform01(), u2 = Uniform01();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  uint64_t state_;
};

int LogNormal(Rng& rng, double median, double sigma, int lo, int hi) {
  const double v = median * std::exp(sigma * rng.Normal());
  return std::clamp(static_cast<int>(std::lround(v)), lo, hi);
}

}  // namespace

absl::StatusOr<LengthDist> ParseLengthDist(std::string_view name) {
  if (name == "uniform") return LengthDist::kUniform;
  if (name == "chat") return LengthDist::kChat;
  if (name == "fixed") return LengthDist::kFixed;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown length distribution '", Sv(name), "': use uniform, chat or fixed"));
}

std::string_view LengthDistName(LengthDist d) {
  switch (d) {
    case LengthDist::kUniform:
      return "uniform";
    case LengthDist::kChat:
      return "chat";
    case LengthDist::kFixed:
      return "fixed";
  }
  return "?";
}

absl::StatusOr<std::vector<WorkloadRequest>> MakeWorkload(const WorkloadSpec& spec,
                                                          int max_model_len) {
  if (spec.requests < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--requests must be at least 1 (got ", spec.requests, ")"));
  }
  int longest = 0;
  if (spec.dist == LengthDist::kFixed) {
    if (spec.prompt_len < 1 || spec.output_len < 1) {
      return absl::InvalidArgumentError("--prompt-len and --output-len must be at least 1");
    }
    longest = spec.prompt_len + spec.output_len;
  } else {
    if (spec.min_len < 1 || spec.max_len < spec.min_len) {
      return absl::InvalidArgumentError(
          absl::StrCat("need 1 <= --min <= --max (got ", spec.min_len, " and ", spec.max_len, ")"));
    }
    longest = 2 * spec.max_len;
  }
  if (longest > max_model_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("a request of this workload can hold ", longest,
                     " tokens (prompt + output), more than ", "max_model_len ", max_model_len,
                     "; lower --max (or the fixed lengths) or raise ", "--max-model-len"));
  }
  Rng rng(spec.seed);
  std::vector<WorkloadRequest> out(static_cast<size_t>(spec.requests));
  for (WorkloadRequest& r : out) {
    switch (spec.dist) {
      case LengthDist::kUniform:
        r.prompt_len = rng.Int(spec.min_len, spec.max_len);
        r.output_len = rng.Int(spec.min_len, spec.max_len);
        break;
      case LengthDist::kChat:
        r.prompt_len = LogNormal(rng, 200.0, 1.0, spec.min_len, spec.max_len);
        r.output_len = LogNormal(rng, 150.0, 0.7, spec.min_len, spec.max_len);
        break;
      case LengthDist::kFixed:
        r.prompt_len = spec.prompt_len;
        r.output_len = spec.output_len;
        break;
    }
  }
  return out;
}

std::vector<int32_t> WorkloadPrompt(uint64_t seed, int index, int length, int n_vocab,
                                    int first_id) {
  Rng rng(seed * 0x100000001B3ull + static_cast<uint64_t>(index) + 1);
  const int lo = std::min(first_id, n_vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(length));
  for (int32_t& id : ids) id = rng.Int(lo, n_vocab - 1);
  return ids;
}

std::string DescribeWorkload(const WorkloadSpec& s) {
  std::string lengths;
  switch (s.dist) {
    case LengthDist::kUniform:
      lengths = absl::StrFormat("uniform %d-%d (prompt and output each)", s.min_len, s.max_len);
      break;
    case LengthDist::kChat:
      lengths = absl::StrFormat(
          "chat: log-normal prompts (median 200) and outputs (median 150), clipped to %d-%d",
          s.min_len, s.max_len);
      break;
    case LengthDist::kFixed:
      lengths = absl::StrFormat("fixed prompt %d + output %d", s.prompt_len, s.output_len);
      break;
  }
  return absl::StrFormat("%d requests, %s, seed %d", s.requests, lengths, s.seed);
}

}  // namespace pinfer
