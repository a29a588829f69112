// Synthetic serving workloads for bench-kv: N requests whose prompt and output lengths are
// drawn, with a seed, from a named distribution. The same spec and seed give the same
// requests on every machine (the generator and its transforms are written out here, not
// taken from <random>'s implementation-defined distributions).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pinfer {

enum class LengthDist {
  kUniform,  // prompt and output each uniform in [min_len, max_len] (nano-vllm's benchmark)
  kChat,     // long-tailed: log-normal prompts (median 200), outputs (median 150), clipped
  kFixed,    // every request prompt_len + output_len
};
absl::StatusOr<LengthDist> ParseLengthDist(std::string_view name);  // uniform | chat | fixed
std::string_view LengthDistName(LengthDist d);

struct WorkloadSpec {
  LengthDist dist = LengthDist::kUniform;
  int requests = 100;
  int min_len = 100, max_len = 1024;       // bounds (uniform) or clip range (chat)
  int prompt_len = 512, output_len = 128;  // fixed
  uint64_t seed = 1;
};

struct WorkloadRequest {
  int prompt_len = 0;
  int output_len = 0;
};

// InvalidArgument when the spec is malformed or a request could exceed max_model_len.
absl::StatusOr<std::vector<WorkloadRequest>> MakeWorkload(const WorkloadSpec& spec,
                                                          int max_model_len);

// Prompt token ids for request `index`: seeded, in [first_id, n_vocab).
std::vector<int32_t> WorkloadPrompt(uint64_t seed, int index, int length, int n_vocab,
                                    int first_id = 3);

// A one-line description, e.g. "200 requests, uniform 100-1024 (prompt and output), seed 1".
std::string DescribeWorkload(const WorkloadSpec& spec);

}  // namespace pinfer
