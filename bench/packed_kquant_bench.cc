// The row-packed K-quant kernels (loaders/quants_packed_k.h) beside the kernels of the unpacked
// path they would replace, on one thread: a 4096 x 4096 Q4_K / Q5_K / Q6_K matrix (a llama-7B
// projection, bench/quantized_weights.h) against 1, 64 and 512 tokens' Q8_K activations
// (quantized once, outside the timed loop).
//   BM_Row/avx2/<format>/<tokens>: the AVX2 RowDotFn per weight row over all the tokens (decode
//     and MatMul's batched integer path before tiling).
//   BM_Tile/avx2/<format>/<tokens>: the AVX2 TileDotFn over the whole matrix (MatMul's prefill).
//   BM_Packed/<set>/<format>/<tokens>: the set's PackedDotFn over the packed matrix (packed
//     once, outside the timed loop); BM_PackedDram: the same over 8 copies in turn (from DRAM).
// Bytes processed are weight bytes (GB/s of weights streamed: the decode figure); op/s counts a
// multiply and an add per weight and token (2 * rows * cols * tokens per pass: the prefill
// figure). The sets run are those this CPU runs.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/quantized_weights.h"
#include "bench/rates.h"
#include "benchmark/benchmark.h"
#include "loaders/kernel_set.h"
#include "loaders/quants.h"
#include "loaders/quants_packed_k.h"
#include "loaders/quants_q8k.h"
#include "loaders/quants_tile.h"

namespace pinfer {
namespace {

using bench::kCols;
using bench::kRows;
using bench::Matrix;
using bench::SetWeightRates;
using bench::WeightsOf;

void BM_Row(benchmark::State& state, quants::RowDotFn dot, GgmlType t, int n_tok) {
  const Matrix& w = WeightsOf(t);
  const std::vector<uint8_t> acts = bench::Activations(t, n_tok);
  const int64_t act_row = quants::Q8KRowBytes(kCols);
  std::vector<float> y(kRows * n_tok);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r)
      dot(w.data.data() + r * w.row_bytes, acts.data(), act_row, n_tok, kCols, y.data() + r, kRows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetWeightRates(state, static_cast<int64_t>(w.data.size()), kRows * kCols * n_tok);
}

void BM_Tile(benchmark::State& state, quants::TileDotFn tile, GgmlType t, int n_tok) {
  const Matrix& w = WeightsOf(t);
  const std::vector<uint8_t> acts = bench::Activations(t, n_tok);
  const int64_t act_row = quants::Q8KRowBytes(kCols);
  std::vector<float> y(kRows * n_tok);
  for (auto _ : state) {
    tile(w.data.data(), static_cast<int64_t>(w.row_bytes), kRows, acts.data(), act_row, n_tok,
         kCols, y.data(), kRows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetWeightRates(state, static_cast<int64_t>(w.data.size()), kRows * kCols * n_tok);
}

// copies > 1: that many copies of the packed matrix, one per pass in turn, so the weights come
// from DRAM (8 copies of a 4096 x 4096 Q4_K matrix are 75 MB, past a 32 MB L3) as in a model.
void BM_Packed(benchmark::State& state, quants::PackedDotFn dot, GgmlType t, int n_tok,
               int copies) {
  const Matrix& w = WeightsOf(t);
  const int64_t bytes = quants::PackedKBytes(t, kRows, kCols);
  std::vector<uint8_t> packed(bytes * copies);
  for (int c = 0; c < copies; ++c) {
    quants::PackKRows(t, w.data.data(), static_cast<int64_t>(w.row_bytes), kRows, kCols,
                      packed.data() + c * bytes);
  }
  const std::vector<uint8_t> acts = bench::Activations(t, n_tok);
  const int64_t act_row = quants::Q8KRowBytes(kCols);
  std::vector<float> y(kRows * n_tok);
  int c = 0;
  for (auto _ : state) {
    dot(packed.data() + c * bytes, kRows, acts.data(), act_row, n_tok, kCols, y.data(), kRows);
    c = (c + 1) % copies;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetWeightRates(state, static_cast<int64_t>(w.data.size()), kRows * kCols * n_tok);
}

[[maybe_unused]] const bool kRegistered = [] {
  if (!CpuRunsAvx2Fma16c() || quants::Avx2KQuantKernels() == nullptr) return false;
  struct Format {
    const char* name;
    GgmlType type;
    quants::RowDotFn quants::KQuantKernels::*row;
    quants::TileDotFn quants::KQuantTileKernels::*tile;
    quants::PackedDotFn quants::PackedKQuantKernels::*packed;
  };
  const Format formats[] = {{"Q4_K", GgmlType::kQ4_K, &quants::KQuantKernels::q4_k,
                             &quants::KQuantTileKernels::q4_k, &quants::PackedKQuantKernels::q4_k},
                            {"Q5_K", GgmlType::kQ5_K, &quants::KQuantKernels::q5_k,
                             &quants::KQuantTileKernels::q5_k, &quants::PackedKQuantKernels::q5_k},
                            {"Q6_K", GgmlType::kQ6_K, &quants::KQuantKernels::q6_k,
                             &quants::KQuantTileKernels::q6_k, &quants::PackedKQuantKernels::q6_k}};
  std::vector<const quants::PackedKQuantKernels*> sets{quants::Avx2PackedKQuantKernels()};
  if (CpuRunsAvxVnni()) sets.push_back(quants::AvxVnniPackedKQuantKernels());
  if (CpuRunsAvx512Vnni()) sets.push_back(quants::Avx512VnniPackedKQuantKernels());
  for (const Format& f : formats) {
    for (int n_tok : {1, 64, 512}) {
      const std::string suffix = std::string("/") + f.name + "/" + std::to_string(n_tok);
      benchmark::RegisterBenchmark(("BM_Row/avx2" + suffix).c_str(), BM_Row,
                                   quants::Avx2KQuantKernels()->*f.row, f.type, n_tok)
          ->Unit(benchmark::kMillisecond);
      if (n_tok > 1) {
        benchmark::RegisterBenchmark(("BM_Tile/avx2" + suffix).c_str(), BM_Tile,
                                     quants::Avx2KQuantTileKernels()->*f.tile, f.type, n_tok)
            ->Unit(benchmark::kMillisecond);
      }
      for (const quants::PackedKQuantKernels* s : sets) {
        benchmark::RegisterBenchmark(("BM_Packed/" + std::string(s->name) + suffix).c_str(),
                                     BM_Packed, s->*f.packed, f.type, n_tok, 1)
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("BM_PackedDram/" + std::string(s->name) + suffix).c_str(),
                                     BM_Packed, s->*f.packed, f.type, n_tok, 8)
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace pinfer
