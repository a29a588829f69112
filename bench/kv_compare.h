// bench-kv: one workload through the real engine (scheduler, model, KV cache) against one KV
// memory budget, once with the paged cache and once with the contiguous one.
//
// Definitions (measured after every engine step, when the step's tokens are stored):
// - utilization = KvReport().bytes_used / bytes_reserved: bytes holding stored tokens over
//   the whole pool.
// - a step is *saturated* (the KV pool is what holds the queue back) when its scheduling
//   left the head of the queue waiting for KV blocks: not for a seat under max_num_seqs or
//   for the step's token budget (Scheduler::kv_blocked; for the contiguous layout: no free
//   max_model_len seat; for the paged one, admission headroom included). kv_utilization_mean / _min
//   are over saturated steps; _mean_all is over every step, including the ramp-up and the drain at
//   the end, where any cache sits partly empty.
// - queue wait: from submission (all requests are submitted before the first step, t = 0)
//   to the start of the step that first admitted the request; in steps and in seconds.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/workload.h"
#include "engine/engine.h"
#include "engine/model/model.h"

namespace pinfer {

struct StepSample {
  double t_s = 0;          // seconds since the first step began, at the end of this one
  double utilization = 0;  // bytes_used / bytes_reserved
  int running = 0, waiting = 0;
  bool saturated = false;
};

struct LayoutResult {
  std::string layout;  // "paged" | "contiguous"
  uint64_t bytes_reserved = 0;
  int64_t pool_slots = 0;                    // token slots in the pool
  int max_concurrency_at_max_model_len = 0;  // the ledger's guarantee
  double kv_utilization_mean = 0, kv_utilization_min = 0, kv_utilization_mean_all = 0;
  int64_t saturated_steps = 0;
  int max_running = 0;
  double mean_running = 0;  // over all steps
  int64_t steps = 0;
  double elapsed_s = 0;
  int64_t finished = 0, output_tokens = 0, prefill_tokens = 0, preemptions = 0;
  int64_t forwarded_tokens = 0;       // prefill, recompute and decode tokens through the model
  double us_per_forwarded_token = 0;  // elapsed / forwarded_tokens
  double requests_per_s = 0, output_tokens_per_s = 0;
  double queue_wait_mean_s = 0, queue_wait_max_s = 0;
  double queue_wait_mean_steps = 0;
  int64_t queue_wait_max_steps = 0;
  std::vector<StepSample> samples;
};

struct KvBenchResult {
  WorkloadSpec spec;
  std::string model;           // path or description
  std::string device = "cpu";  // what ran it, as the backend factory's caller describes it
  int requests = 0;
  int64_t prompt_tokens = 0, output_tokens = 0;  // of the workload as drawn
  int max_model_len = 0, block_size = 0, max_num_seqs = 0, max_num_batched_tokens = 0;
  std::string kv_dtype;
  uint64_t kv_cache_memory = 0;  // the budget both layouts got (whole max_model_len slots)
  uint64_t kv_bytes_per_token = 0;
  LayoutResult paged, contiguous;
};

// Runs the workload with config (its kv_layout is overridden; ignore_eos so every output
// reaches its drawn length; greedy). The prompts share nothing, so with prefix caching on
// (config's choice, the default) the only hits are a preempted sequence finding its own
// blocks still cached when it is re-admitted; the contiguous layout has no prefix cache.
// make_backend (may be empty: the CPU backend with config.threads) builds a fresh backend
// for each run.
using BackendFactory =
    std::function<absl::StatusOr<std::unique_ptr<Backend>>(const EngineConfig& config)>;
absl::StatusOr<LayoutResult> RunKvWorkload(const Model& model, EngineConfig config,
                                           const std::vector<WorkloadRequest>& requests,
                                           uint64_t seed, const BackendFactory& make_backend = {});

// Both layouts. The budget config.kv_cache_memory is first rounded down to whole
// max_model_len sequences, so both pools reserve the same bytes.
absl::StatusOr<KvBenchResult> CompareKvLayouts(const Model& model, EngineConfig config,
                                               const WorkloadSpec& spec,
                                               const BackendFactory& make_backend = {});

}  // namespace pinfer
