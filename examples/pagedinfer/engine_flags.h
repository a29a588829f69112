// The engine options every model-running subcommand shares (run, chat, serve, bench, ...).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "examples/pagedinfer/args.h"

namespace pinfer::cli {

struct EngineFlags {
  std::string model;
  std::string kv_dtype = "f16";
  std::string kv_layout = "paged";
  int block_size = 16;
  int max_model_len = 0;
  int max_num_seqs = 16;
  int max_num_batched_tokens = 512;
  int admission_headroom = 32;
  std::string kv_cache_memory;  // bytes, e.g. 2GiB
  double memory_utilization = 0.9;
  std::string reserve = "64MiB";
  int threads = 0;
  bool no_prefix_caching = false;
  bool enforce_eager = false;   // cuda: no CUDA graphs for decode steps
  std::string device = "auto";  // auto | cuda | cpu

  void Register(Args& args);
  absl::StatusOr<EngineConfig> ToConfig() const;
  // The backend --device picks for `model` (auto: cuda when built with CUDA and a device is
  // present, else cpu). Prints nothing; `chosen` (optional) gets a one-line description.
  absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const Model& model,
                                                       const EngineConfig& config,
                                                       std::string* chosen = nullptr) const;
};

}  // namespace pinfer::cli
