// MatMul (engine/matmul.h) of a 4096 x 4096 weight matrix in its storage type against 1 token
// (decode: a mat-vec bound by weight bytes) and 4, 16 and 64 tokens (batches that decode each
// weight row once for all their tokens), on all hardware threads, with the process's kernel set
// (PAGEDINFER_KERNELS). The formats with integer kernels run twice: 8-bit activations (the
// default) and the float path (/float: MatMulOptions::float_activations, what MatMul did
// before). Bytes processed are weight bytes, so the rate reads as GB/s of weights streamed;
// items are multiply-adds; op/s counts a multiply and an add per weight and token (rates.h).
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/rates.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "loaders/quants.h"

namespace pinfer {
namespace {

constexpr int64_t kDim = 4096;
constexpr int64_t kDistinctRows = 64;  // quantized once, then tiled

struct OwnedMatrix {
  std::vector<uint8_t> data;
  WeightMatrix w;
};

const OwnedMatrix& MatrixOf(GgmlType t) {
  static std::vector<std::unique_ptr<std::pair<GgmlType, OwnedMatrix>>> cache;
  for (const auto& e : cache) {
    if (e->first == t) return e->second;
  }
  auto e = std::make_unique<std::pair<GgmlType, OwnedMatrix>>();
  e->first = t;
  OwnedMatrix& m = e->second;
  const size_t row_bytes = GgmlRowBytes(t, kDim);
  m.data.resize(row_bytes * kDim);
  std::mt19937 rng(3);
  std::normal_distribution<float> gauss(0.0f, 0.02f);
  std::vector<float> row(kDim);
  for (int64_t r = 0; r < kDistinctRows; ++r) {
    for (float& v : row) v = gauss(rng);
    QuantizeRow(t, row.data(), m.data.data() + r * row_bytes, kDim);
  }
  for (int64_t r = kDistinctRows; r < kDim; ++r) {
    std::memcpy(m.data.data() + r * row_bytes, m.data.data() + (r % kDistinctRows) * row_bytes,
                row_bytes);
  }
  m.w = MatrixView("bench", t, kDim, kDim, m.data.data());
  cache.push_back(std::move(e));
  return cache.back()->second;
}

void BM_MatMul(benchmark::State& state, GgmlType t, bool float_activations) {
  const int n_tokens = static_cast<int>(state.range(0));
  const OwnedMatrix& m = MatrixOf(t);
  static ThreadPool pool(0);
  auto ws = CpuWorkspace::ForMatMul(kDim, n_tokens, pool.size());
  if (!ws.ok()) {
    state.SkipWithError(std::string(ws.status().message()).c_str());
    return;
  }
  std::vector<float> x(static_cast<size_t>(n_tokens * kDim)), y(x.size());
  std::mt19937 rng(5);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (float& v : x) v = gauss(rng);
  for (auto _ : state) {
    if (!MatMul(m.w, x.data(), n_tokens, y.data(), pool, **ws, {float_activations}).ok()) {
      state.SkipWithError("MatMul refused its workspace");
      return;
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(m.w.bytes()));
  state.SetItemsProcessed(state.iterations() * n_tokens * kDim * kDim);
  bench::SetOpRate(state, n_tokens * kDim * kDim);
  state.counters["threads"] = pool.size();
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(n_tokens),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}

#define PINFER_MATMUL_BENCH(T)                           \
  BENCHMARK_CAPTURE(BM_MatMul, T, GgmlType::k##T, false) \
      ->Arg(1)                                           \
      ->Arg(4)                                           \
      ->Arg(16)                                          \
      ->Arg(64)                                          \
      ->Unit(benchmark::kMillisecond)                    \
      ->UseRealTime()

#define PINFER_MATMUL_FLOAT_BENCH(T)                            \
  BENCHMARK_CAPTURE(BM_MatMul, T##_float, GgmlType::k##T, true) \
      ->Arg(1)                                                  \
      ->Arg(4)                                                  \
      ->Arg(16)                                                 \
      ->Arg(64)                                                 \
      ->Unit(benchmark::kMillisecond)                           \
      ->UseRealTime()

PINFER_MATMUL_BENCH(Q4_0);
PINFER_MATMUL_FLOAT_BENCH(Q4_0);
PINFER_MATMUL_FLOAT_BENCH(Q8_0);
PINFER_MATMUL_BENCH(Q4_K);
PINFER_MATMUL_BENCH(Q8_0);
PINFER_MATMUL_BENCH(Q6_K);
PINFER_MATMUL_BENCH(F16);

}  // namespace
}  // namespace pinfer
