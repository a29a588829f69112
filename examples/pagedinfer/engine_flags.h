// The engine options every model-running subcommand shares (run, chat, serve, bench, bench-kv,
// perplexity), and the one way they make a backend and an engine from them.
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
  int block_size = kDefaultBlockSize;
  int max_model_len = 0;
  int max_num_seqs = kDefaultMaxNumSeqs;  // run and chat: 1 (one conversation)
  int max_num_batched_tokens = kDefaultMaxNumBatchedTokens;
  int admission_headroom = 32;
  std::string kv_cache_memory;  // bytes, e.g. 2GiB
  double memory_utilization = kDefaultMemoryUtilization;
  std::string reserve = "64MiB";
  int threads = 0;
  bool no_prefix_caching = false;
  bool mlock = false;
  bool enforce_eager = false;   // cuda: no CUDA graphs for decode steps
  bool no_repack = false;       // cpu: keep the file's layout (llama.cpp's --no-repack)
  std::string device = "auto";  // auto | cuda | cpu
  int n_gpu_layers = -1;        // llama.cpp's -ngl: 0 = cpu, all layers = cuda; -1: not given

  // Every engine flag (run, chat, serve).
  void Register(Args& args);
  // Only where the model runs: --device, -ngl, --enforce-eager, --no-repack (bench, bench-kv,
  // perplexity, which size their own engines).
  void RegisterDevice(Args& args);
  absl::StatusOr<EngineConfig> ToConfig() const;
  // --device after -ngl for `model`: "auto", "cuda" or "cpu"; InvalidArgument for an unknown
  // name, a -ngl that offloads only some layers, or a -ngl that contradicts --device.
  absl::StatusOr<std::string> Device(const Model& model) const;
  // The backend --device picks for `model` (auto: cuda when built with CUDA and a device is
  // present, else cpu). An explicit cuda without a usable device is FailedPrecondition saying
  // why. Prints nothing; `chosen` (optional) gets a one-line description.
  absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const Model& model,
                                                       const EngineConfig& config,
                                                       std::string* chosen = nullptr) const;
};

// The backend (MakeBackend) and the engine on it. Prints nothing (the engine is made quiet);
// `device` (optional) gets the backend's description.
absl::StatusOr<std::unique_ptr<Engine>> MakeEngine(const EngineFlags& flags, const Model& model,
                                                   const EngineConfig& config,
                                                   std::string* device = nullptr);

// What run, chat and serve start from: the model of --model and an engine on the backend of
// --device. The model outlives the engine (members destroyed in reverse order).
struct LoadedEngine {
  std::unique_ptr<Model> model;
  std::unique_ptr<Engine> engine;
  std::string device;  // "cpu, 8 threads", "cuda:0 (NVIDIA H200), ..."
};

// Loads flags.model and makes the engine (MakeEngine), with a progress line on a terminal
// when that takes over a second; then prints "device: ..." and the KV pool line to stderr.
absl::StatusOr<LoadedEngine> LoadEngine(const EngineFlags& flags, const EngineConfig& config);

}  // namespace pinfer::cli
