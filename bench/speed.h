// `pagedinfer bench`: prompt processing (pp) and text generation (tg) speed of one sequence,
// as llama-bench measures them (ppN: a prompt of N tokens in one step; tgN: N tokens decoded
// one at a time), mean and standard deviation over repetitions after an untimed warm-up;
// plus decode's achieved memory bandwidth against a measured read bandwidth (the bound of a
// pass that only reads weights) and the memcpy bandwidth (read + write). Both start
// from an empty context, or at a context depth of D tokens already in the cache (llama-bench's
// -d: the tests are then named "pp512 @ d1024"), which the prefix cache serves to every
// repetition.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/model/model.h"

namespace pinfer {

struct SpeedOptions {
  int n_prompt = 512;  // 0: no pp test
  int n_gen = 128;     // 0: no tg test
  int repetitions = 5;
  int n_depth = 0;      // context depth: a multiple of the KV block size (16)
  EngineConfig engine;  // kv_dtype, kv_layout, threads (pool sizes are set from the tests)
  // The backend for the engine's config; empty: the CPU backend. SpeedResult::backend names
  // it (the backend's own name).
  std::function<absl::StatusOr<std::unique_ptr<Backend>>(const EngineConfig&)> make_backend;
};

struct SpeedTest {
  std::string name;  // "pp512", "tg128", "tg32 @ d1024"
  int n_prompt = 0, n_gen = 0, n_depth = 0;
  std::vector<double> samples_ts;  // tokens per second, one per repetition
  double mean_ts = 0, stddev_ts = 0;
  // tg only: bytes read per generated token (weights + KV of the mean context) and the bandwidth
  // that implies at the mean speed.
  uint64_t bytes_per_token = 0;
  double achieved_gbps = 0;
};

struct ModelSummary {
  std::string label;  // llama-bench style: "llama 7B Q4_0"
  uint64_t size_bytes = 0;
  uint64_t n_params = 0;
  uint64_t decode_weight_bytes = 0;  // weights read per decoded token (one embedding row)
  uint64_t kv_bytes_per_token = 0;
};
ModelSummary SummarizeModel(const Model& model, KvDtype kv_dtype);

struct SpeedResult {
  ModelSummary model;
  std::string backend = "CPU";
  int threads = 0;
  std::string kv_dtype, kv_layout;
  std::string cpu_kernels;  // the CPU kernel set (loaders/kernel_set.h): scalar, avx2, neon
  // The CPU backend's weight layout (CpuBackend::RepackSummary): "repacked 224 matrices ..."
  // or "file layout (--no-repack)"; empty on a device.
  std::string cpu_weights;
  double copy_gbps = 0;  // memcpy: (bytes read + bytes written) per second
  double read_gbps = 0;  // threads summing a buffer far larger than the caches
  std::vector<SpeedTest> tests;
};

// memcpy of two `bytes` buffers on `threads` threads, best of `reps`: GB/s counting bytes
// read plus bytes written (10^9 bytes per GB).
double MeasureCopyBandwidth(int threads, size_t bytes = 256ull << 20, int reps = 5);

// Read bandwidth: `threads` threads each sum 64-bit words of their even share of one `bytes`
// buffer (written once beforehand, so its pages are resident), best of `reps` passes: bytes
// read per second (10^9 per GB). The default 512 MiB is far larger than any L3 cache, so
// this is the DRAM bound of a decode step, which reads each weight once and writes little.
double MeasureReadBandwidth(int threads, size_t bytes = 512ull << 20, int reps = 5);

absl::StatusOr<SpeedResult> RunSpeedBench(const Model& model, const SpeedOptions& options);

std::string SpeedMarkdown(const SpeedResult& r);  // llama-bench's table, then bandwidth
std::string SpeedJson(const SpeedResult& r);      // an array of records, one per test

}  // namespace pinfer
