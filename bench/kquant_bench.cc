// The K-quant integer kernels (loaders/quants_q8k.h) against the float path they replace, on one
// thread: every row of a 4096 x 4096 Q4_K / Q5_K / Q6_K matrix against 1 token (decode) and 8
// tokens (a small batch).
//   BM_FloatDot/<format>/<tokens>: before. 1 token: DotRow per row (MatMul's decode path);
//     8 tokens: MatMul's batched path, the rows of each 16-row tile decoded into the dot layout
//     (DequantizeRowDotLayout) and multiplied into the 8 laid-out inputs by DotF32Tile.
//   BM_Int8Dot/<set>/<format>/<tokens>: after. The kernel set's RowDotFn per row over the
//     tokens' Q8_K activations (quantized once, outside the timed loop).
//   BM_QuantizeQ8K/<set>: one 4096-value token row to Q8_K.
// Bytes processed are weight bytes (GB/s of weights streamed); op/s counts a multiply and an
// add per weight and token (2 * rows * cols * tokens per pass). The sets run are those the CPU
// supports.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/quantized_weights.h"
#include "bench/rates.h"
#include "benchmark/benchmark.h"
#include "engine/memory/cpu_workspace_layout.h"
#include "loaders/quants.h"
#include "loaders/quants_q8k.h"

namespace pinfer {
namespace {

using quants::KQuantKernels;

using bench::kCols;
using bench::kRows;
using bench::Matrix;
using bench::SetWeightRates;
using bench::WeightsOf;

std::vector<float> Inputs(int n_tok) {
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(kCols * n_tok);
  for (float& v : x) v = gauss(rng);
  return x;
}

void BM_FloatDot(benchmark::State& state, GgmlType t, int n_tok) {
  const Matrix& w = WeightsOf(t);
  const std::vector<float> x = Inputs(n_tok);
  std::vector<float> y(kRows * n_tok);
  if (n_tok == 1) {
    for (auto _ : state) {
      for (int64_t r = 0; r < kRows; ++r)
        y[r] = DotRow(t, w.data.data() + r * w.row_bytes, x.data(), kCols);
      benchmark::DoNotOptimize(y.data());
      benchmark::ClobberMemory();
    }
  } else {
    std::vector<float> xl(x.size()), tile(kMatMulTileRows * kCols);
    for (int tok = 0; tok < n_tok; ++tok)
      ToDotLayout(x.data() + tok * kCols, xl.data() + tok * kCols, kCols);
    for (auto _ : state) {
      for (int64_t r0 = 0; r0 < kRows; r0 += kMatMulTileRows) {
        for (int64_t r = 0; r < kMatMulTileRows; ++r) {
          DequantizeRowDotLayout(t, w.data.data() + (r0 + r) * w.row_bytes, tile.data() + r * kCols,
                                 kCols);
        }
        DotF32Tile(tile.data(), kCols, kMatMulTileRows, xl.data(), kCols, n_tok, kCols,
                   y.data() + r0, kRows);
      }
      benchmark::DoNotOptimize(y.data());
      benchmark::ClobberMemory();
    }
  }
  SetWeightRates(state, static_cast<int64_t>(w.data.size()), kRows * kCols * n_tok);
}

void BM_Int8Dot(benchmark::State& state, const KQuantKernels* k, GgmlType t, int n_tok) {
  const Matrix& w = WeightsOf(t);
  const std::vector<float> x = Inputs(n_tok);
  const int64_t act_row = quants::Q8KRowBytes(kCols);
  std::vector<uint8_t> acts(act_row * n_tok);
  for (int tok = 0; tok < n_tok; ++tok)
    k->quantize_q8k(x.data() + tok * kCols, acts.data() + tok * act_row, kCols);
  const quants::RowDotFn dot = t == GgmlType::kQ4_K   ? k->q4_k
                               : t == GgmlType::kQ5_K ? k->q5_k
                                                      : k->q6_k;
  std::vector<float> y(kRows * n_tok);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) {
      dot(w.data.data() + r * w.row_bytes, acts.data(), act_row, n_tok, kCols, y.data() + r, kRows);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetWeightRates(state, static_cast<int64_t>(w.data.size()), kRows * kCols * n_tok);
}

void BM_QuantizeQ8K(benchmark::State& state, const KQuantKernels* k) {
  const std::vector<float> x = Inputs(1);
  std::vector<uint8_t> out(quants::Q8KRowBytes(kCols));
  for (auto _ : state) {
    k->quantize_q8k(x.data(), out.data(), kCols);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kCols * static_cast<int64_t>(sizeof(float)));
}

std::vector<const KQuantKernels*> Sets() {
  std::vector<const KQuantKernels*> sets{&quants::ScalarKQuantKernels()};
#if defined(__x86_64__)
  if (quants::Avx2KQuantKernels() != nullptr && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    sets.push_back(quants::Avx2KQuantKernels());
  }
#endif
  if (quants::NeonKQuantKernels() != nullptr) sets.push_back(quants::NeonKQuantKernels());
  return sets;
}

[[maybe_unused]] const bool kRegistered = [] {
  const std::pair<const char*, GgmlType> formats[] = {
      {"Q4_K", GgmlType::kQ4_K}, {"Q5_K", GgmlType::kQ5_K}, {"Q6_K", GgmlType::kQ6_K}};
  for (const auto& [name, t] : formats) {
    for (int n_tok : {1, 8}) {
      const std::string suffix = std::string(name) + "/" + std::to_string(n_tok);
      benchmark::RegisterBenchmark(("BM_FloatDot/" + suffix).c_str(), BM_FloatDot, t, n_tok)
          ->Unit(benchmark::kMillisecond);
      for (const KQuantKernels* k : Sets()) {
        benchmark::RegisterBenchmark(("BM_Int8Dot/" + std::string(k->name) + "/" + suffix).c_str(),
                                     BM_Int8Dot, k, t, n_tok)
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  for (const KQuantKernels* k : Sets()) {
    benchmark::RegisterBenchmark(("BM_QuantizeQ8K/" + std::string(k->name)).c_str(), BM_QuantizeQ8K,
                                 k);
  }
  return true;
}();

}  // namespace
}  // namespace pinfer
