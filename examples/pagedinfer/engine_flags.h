// The engine options every model-running subcommand shares (run, chat, serve, bench, ...).
#pragma once

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
  std::string kv_cache_memory;  // bytes, e.g. 2GiB
  double memory_utilization = 0.9;
  std::string reserve = "64MiB";
  int threads = 0;
  bool no_prefix_caching = false;

  void Register(Args& args);
  absl::StatusOr<EngineConfig> ToConfig() const;
};

}  // namespace pinfer::cli
