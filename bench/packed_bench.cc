// The packed (row-interleaved) Q8A kernels (loaders/quants_packed.h) on one thread: the shared
// 4096 x 4096 Q4_0 / Q8_0 matrix (bench/quantized_weights.h), packed once outside the timed
// loop, against 1, 64 and 512 tokens' Q8A activations (quantized once), per kernel set this
// CPU runs (not the scalar one: minutes per pass). Beside them, as "before": the same set's
// row kernels (quants_q8a.h's RowDotFn, each weight row over all the tokens, MatMul's path for
// unpacked weights) at 1 and 64 tokens.
//   BM_PackedGemm/<set>/<format>/<tokens>[/dram]  (dram: 8 copies of the matrix, past L3)
//   BM_RowGemm/<set>/<format>/<tokens>   (avx2 / avxvnni; avx512vnni's rows are avxvnni's)
// bytes/s: weight bytes per pass (the decode figure, n_tok 1); op/s: a multiply and an add per
// weight and token (2 * rows * cols * tokens per pass; the prefill figure).
#include <string>
#include <vector>

#include "bench/quantized_weights.h"
#include "bench/rates.h"
#include "benchmark/benchmark.h"
#include "loaders/kernel_set.h"
#include "loaders/quants.h"
#include "loaders/quants_packed.h"
#include "loaders/quants_q8a.h"

namespace pinfer {
namespace {

using bench::kCols;
using bench::kRows;
using bench::Matrix;
using bench::SetWeightRates;
using bench::WeightsOf;

// The matrix packed, or (copies > 1) copies of it one below the other: 8 copies (75 MB of Q4_0,
// 143 MB of Q8_0) are past the 32 MB L3 here, so the kernel reads them from DRAM, as decode
// reads a model's weights.
const std::vector<uint8_t>& PackedOf(GgmlType t, int copies) {
  static std::vector<std::pair<std::pair<GgmlType, int>, std::vector<uint8_t>>> cache;
  for (auto& [key, p] : cache) {
    if (key.first == t && key.second == copies) return p;
  }
  const Matrix& w = WeightsOf(t);
  std::vector<uint8_t> p(quants::PackedBytes(t, kRows, kCols) * copies);
  for (int c = 0; c < copies; ++c) {
    quants::PackRows(t, w.data.data(), static_cast<int64_t>(w.row_bytes), kRows, kCols,
                     p.data() + c * quants::PackedBytes(t, kRows, kCols));
  }
  cache.emplace_back(std::make_pair(t, copies), std::move(p));
  return cache.back().second;
}

void BM_PackedGemm(benchmark::State& state, quants::PackedDotFn dot, GgmlType t, int n_tok,
                   int copies) {
  const std::vector<uint8_t>& w = PackedOf(t, copies);
  const int64_t rows = kRows * copies;
  const std::vector<uint8_t> acts = bench::Activations(t, n_tok);
  std::vector<float> y(rows * n_tok);
  for (auto _ : state) {
    dot(w.data(), rows, acts.data(), quants::Q8ARowBytes(kCols), n_tok, kCols, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetWeightRates(state, static_cast<int64_t>(w.size()), rows * kCols * n_tok);
}

void BM_RowGemm(benchmark::State& state, quants::RowDotFn dot, GgmlType t, int n_tok) {
  const Matrix& w = WeightsOf(t);
  const std::vector<uint8_t> acts = bench::Activations(t, n_tok);
  std::vector<float> y(kRows * n_tok);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r)
      dot(w.data.data() + r * w.row_bytes, acts.data(), quants::Q8ARowBytes(kCols), n_tok, kCols,
          y.data() + r, kRows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetWeightRates(state, static_cast<int64_t>(w.data.size()), kRows * kCols * n_tok);
}

[[maybe_unused]] const bool kRegistered = [] {
  for (KernelSet s : kAllKernelSets) {
    if (s == KernelSet::kScalar || !KernelSetRuns(s)) continue;
    const quants::PackedQ8AKernels* packed = quants::PackedQ8AKernelsFor(s);
    const quants::Q8AKernels& rows = quants::Q8AKernelsFor(s);
    for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ8_0}) {
      const std::string suffix =
          std::string(KernelSetName(s)) + "/" + std::string(GgmlTypeInfoOf(t).name) + "/";
      for (int n_tok : {1, 64, 512}) {
        if (packed != nullptr && quants::PackedDot(*packed, t) != nullptr) {
          benchmark::RegisterBenchmark(("BM_PackedGemm/" + suffix + std::to_string(n_tok)).c_str(),
                                       BM_PackedGemm, quants::PackedDot(*packed, t), t, n_tok, 1)
              ->Unit(benchmark::kMillisecond);
          if (n_tok <= 64) {  // 8 copies, from DRAM
            benchmark::RegisterBenchmark(
                ("BM_PackedGemm/" + suffix + std::to_string(n_tok) + "/dram").c_str(),
                BM_PackedGemm, quants::PackedDot(*packed, t), t, n_tok, 8)
                ->Unit(benchmark::kMillisecond);
          }
        }
        // The row kernels (avx512vnni's are avxvnni's): 1 and 64 tokens (512 takes seconds).
        if (s != KernelSet::kAvx512Vnni && n_tok <= 64) {
          benchmark::RegisterBenchmark(("BM_RowGemm/" + suffix + std::to_string(n_tok)).c_str(),
                                       BM_RowGemm, quants::Q8ARowDot(rows, t), t, n_tok)
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace pinfer
