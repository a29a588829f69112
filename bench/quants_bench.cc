// Decode hot path per weight format: DotRow of every row of a 4096 x 4096 weight matrix
// against one activation vector (a mat-vec whose weights do not fit in cache), and
// DequantizeRow throughput, with the process's kernel set (PAGEDINFER_KERNELS). Then the
// integer row dots of quants_q8a.h, per kernel set this CPU runs and per token count (1: decode;
// 4, 16: a batch sharing each decoded weight block). One thread. Bytes processed are weight
// bytes, so the rate reads as GB/s of weights; items are multiply-adds (items/s: MAC/s), and
// op/s counts a multiply and an add per weight and token (bench/rates.h).
#include <cstring>
#include <random>
#include <vector>

#include "bench/quantized_weights.h"
#include "bench/rates.h"
#include "benchmark/benchmark.h"
#include "loaders/kernel_set.h"
#include "loaders/quants.h"
#include "loaders/quants_q8a.h"

namespace pinfer {
namespace {

using bench::kCols;
using bench::kRows;
using bench::Matrix;
using bench::WeightsOf;

void BM_DotRow(benchmark::State& state, GgmlType t) {
  const Matrix& w = WeightsOf(t);
  std::vector<float> x(kCols), y(kRows);
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (float& v : x) v = gauss(rng);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r)
      y[r] = DotRow(t, w.data.data() + r * w.row_bytes, x.data(), kCols);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.data.size()));
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
  bench::SetOpRate(state, kRows * kCols);
}

void BM_DequantizeRow(benchmark::State& state, GgmlType t) {
  const Matrix& w = WeightsOf(t);
  std::vector<float> out(kCols);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) {
      DequantizeRow(t, w.data.data() + r * w.row_bytes, out.data(), kCols);
      benchmark::DoNotOptimize(out.data());
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.data.size()));
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}

#define PINFER_QUANT_BENCH(T)                                                     \
  BENCHMARK_CAPTURE(BM_DotRow, T, GgmlType::k##T)->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(BM_DequantizeRow, T, GgmlType::k##T)->Unit(benchmark::kMillisecond)

PINFER_QUANT_BENCH(F32);
PINFER_QUANT_BENCH(F16);
PINFER_QUANT_BENCH(BF16);
PINFER_QUANT_BENCH(Q8_0);
PINFER_QUANT_BENCH(Q4_0);
PINFER_QUANT_BENCH(Q4_1);
PINFER_QUANT_BENCH(Q5_0);
PINFER_QUANT_BENCH(Q5_1);
PINFER_QUANT_BENCH(Q4_K);
PINFER_QUANT_BENCH(Q5_K);
PINFER_QUANT_BENCH(Q6_K);

// RowDot of every row of the matrix against n_tok tokens' 8-bit rows (quantized once, outside
// the timing), with kernel set `set`.
void BM_Q8ARowDot(benchmark::State& state, GgmlType t, KernelSet set) {
  if (!KernelSetRuns(set)) {
    state.SkipWithError("this CPU does not run the set");
    return;
  }
  const int n_tok = static_cast<int>(state.range(0));
  const quants::Q8AKernels& k = quants::Q8AKernelsFor(set);
  const quants::RowDotFn dot = quants::Q8ARowDot(k, t);
  const Matrix& w = WeightsOf(t);
  const int64_t act_bytes = quants::Q8ARowBytes(kCols);
  std::vector<float> x(static_cast<size_t>(n_tok * kCols)), y(static_cast<size_t>(n_tok * kRows));
  std::vector<uint8_t> acts(static_cast<size_t>(n_tok * act_bytes));
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (float& v : x) v = gauss(rng);
  for (int i = 0; i < n_tok; ++i)
    k.quantize(x.data() + i * kCols, acts.data() + i * act_bytes, kCols);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) {
      dot(w.data.data() + r * w.row_bytes, acts.data(), act_bytes, n_tok, kCols, y.data() + r,
          kRows);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.data.size()));
  state.SetItemsProcessed(state.iterations() * n_tok * kRows * kCols);
  bench::SetOpRate(state, n_tok * kRows * kCols);
}

// The activation quantizer: GB/s of float activations read.
void BM_Q8AQuantize(benchmark::State& state, KernelSet set) {
  if (!KernelSetRuns(set)) {
    state.SkipWithError("this CPU does not run the set");
    return;
  }
  const quants::Q8AKernels& k = quants::Q8AKernelsFor(set);
  std::vector<float> x(kCols);
  std::vector<uint8_t> out(static_cast<size_t>(quants::Q8ARowBytes(kCols)));
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (float& v : x) v = gauss(rng);
  for (auto _ : state) {
    k.quantize(x.data(), out.data(), kCols);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kCols * static_cast<int64_t>(sizeof(float)));
}

#define PINFER_Q8A_BENCH(T, S)                                              \
  BENCHMARK_CAPTURE(BM_Q8ARowDot, T##_##S, GgmlType::k##T, KernelSet::k##S) \
      ->Arg(1)                                                              \
      ->Arg(4)                                                              \
      ->Arg(16)                                                             \
      ->Unit(benchmark::kMillisecond)

#define PINFER_Q8A_SET(S)    \
  PINFER_Q8A_BENCH(Q4_0, S); \
  PINFER_Q8A_BENCH(Q4_1, S); \
  PINFER_Q8A_BENCH(Q5_0, S); \
  PINFER_Q8A_BENCH(Q5_1, S); \
  PINFER_Q8A_BENCH(Q8_0, S); \
  BENCHMARK_CAPTURE(BM_Q8AQuantize, S, KernelSet::k##S)->Unit(benchmark::kMicrosecond)

PINFER_Q8A_SET(Scalar);
#if defined(__x86_64__) || defined(_M_X64)
PINFER_Q8A_SET(Avx2);
PINFER_Q8A_SET(AvxVnni);  // skipped where the CPU has no AVX-VNNI
#endif
#if defined(__aarch64__)
PINFER_Q8A_SET(Neon);
#endif

}  // namespace
}  // namespace pinfer
