// The prefill GEMM's integer micro-kernels (loaders/quants_tile.h) against the row kernels they
// replace (loaders/quants_q8a.h, quants_q8k.h), on one thread: a 4096 x 4096 Q4_0 / Q8_0 / Q4_K /
// Q5_K / Q6_K matrix against 8 and 512 tokens' activations (Q8A or Q8_K, quantized once, outside
// the timed loop), as a llama-7B projection in a pp512 prefill.
//   BM_RowGemm/<set>/<format>/<tokens>: before. The set's RowDotFn per weight row over all the
//     tokens (MatMul's batched integer path).
//   BM_TileGemm/<set>/<format>/<tokens>: after. The set's TileDotFn over the whole matrix (its
//     own tiling and token chunks); the K-quants only (the 32-value formats have no tiles: their
//     row-interleaved kernels replace them).
// op/s counts a multiply and an add per weight and token (2 * rows * cols * tokens per pass);
// bytes processed are weight bytes. Only the AVX2 set runs here (the scalar one would take
// minutes per pass); a 1-row pass of the scalar tiles is left to the tests.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/quantized_weights.h"
#include "bench/rates.h"
#include "benchmark/benchmark.h"
#include "loaders/kernel_set.h"
#include "loaders/quants.h"
#include "loaders/quants_q8a.h"
#include "loaders/quants_q8k.h"
#include "loaders/quants_tile.h"

namespace pinfer {
namespace {

using bench::Activations;
using bench::ActRowBytes;
using bench::kCols;
using bench::kRows;
using bench::Matrix;
using bench::SetWeightRates;
using bench::WeightsOf;

void BM_RowGemm(benchmark::State& state, quants::RowDotFn dot, GgmlType t, int n_tok) {
  const Matrix& w = WeightsOf(t);
  const std::vector<uint8_t> acts = Activations(t, n_tok);
  const int64_t act_row = ActRowBytes(t);
  std::vector<float> y(kRows * n_tok);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r)
      dot(w.data.data() + r * w.row_bytes, acts.data(), act_row, n_tok, kCols, y.data() + r, kRows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetWeightRates(state, static_cast<int64_t>(w.data.size()), kRows * kCols * n_tok);
}

void BM_TileGemm(benchmark::State& state, quants::TileDotFn tile, GgmlType t, int n_tok) {
  const Matrix& w = WeightsOf(t);
  const std::vector<uint8_t> acts = Activations(t, n_tok);
  const int64_t act_row = ActRowBytes(t);
  std::vector<float> y(kRows * n_tok);
  for (auto _ : state) {
    tile(w.data.data(), static_cast<int64_t>(w.row_bytes), kRows, acts.data(), act_row, n_tok,
         kCols, y.data(), kRows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetWeightRates(state, static_cast<int64_t>(w.data.size()), kRows * kCols * n_tok);
}

[[maybe_unused]] const bool kRegistered = [] {
#if defined(__x86_64__)
  if (quants::Avx2KQuantTileKernels() == nullptr || !__builtin_cpu_supports("avx2") ||
      !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c")) {
    return false;
  }
  const quants::KQuantKernels& rows = *quants::Avx2KQuantKernels();
  const quants::KQuantTileKernels& tiles = *quants::Avx2KQuantTileKernels();
  const quants::Q8AKernels& rows_a = *quants::Avx2Q8AKernels();
  struct Format {
    const char* name;
    GgmlType type;
    quants::RowDotFn row;
    quants::TileDotFn tile;  // null: the format has no tile kernel (Q8A: rows only)
  };
  const Format formats[] = {{"Q4_0", GgmlType::kQ4_0, rows_a.q4_0, nullptr},
                            {"Q8_0", GgmlType::kQ8_0, rows_a.q8_0, nullptr},
                            {"Q4_K", GgmlType::kQ4_K, rows.q4_k, tiles.q4_k},
                            {"Q5_K", GgmlType::kQ5_K, rows.q5_k, tiles.q5_k},
                            {"Q6_K", GgmlType::kQ6_K, rows.q6_k, tiles.q6_k}};
  for (const Format& f : formats) {
    for (int n_tok : {8, 512}) {
      const std::string suffix = std::string("avx2/") + f.name + "/" + std::to_string(n_tok);
      benchmark::RegisterBenchmark(("BM_RowGemm/" + suffix).c_str(), BM_RowGemm, f.row, f.type,
                                   n_tok)
          ->Unit(benchmark::kMillisecond);
      if (f.tile == nullptr) continue;
      benchmark::RegisterBenchmark(("BM_TileGemm/" + suffix).c_str(), BM_TileGemm, f.tile, f.type,
                                   n_tok)
          ->Unit(benchmark::kMillisecond);
    }
  }
  // The AVX-VNNI set's Q8A kernels (its K-quant kernels are the AVX2 ones above).
  if (quants::AvxVnniQ8AKernels() != nullptr && KernelSetRuns(KernelSet::kAvxVnni)) {
    const quants::Q8AKernels& rows_v = *quants::AvxVnniQ8AKernels();
    const Format vnni[] = {{"Q4_0", GgmlType::kQ4_0, rows_v.q4_0, nullptr},
                           {"Q8_0", GgmlType::kQ8_0, rows_v.q8_0, nullptr}};
    for (const Format& f : vnni) {
      for (int n_tok : {8, 512}) {
        const std::string suffix = std::string("avxvnni/") + f.name + "/" + std::to_string(n_tok);
        benchmark::RegisterBenchmark(("BM_RowGemm/" + suffix).c_str(), BM_RowGemm, f.row, f.type,
                                     n_tok)
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
#endif
  return true;
}();

}  // namespace
}  // namespace pinfer
