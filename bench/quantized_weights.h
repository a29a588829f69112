// The weight matrix the kernel micro-benchmarks (quants_bench, kquant_bench, gemm_bench) share:
// a 4096 x 4096 matrix of one quantized type, as a llama-7B projection. 64 distinct rows of
// Gaussian values (sigma 0.02, seed 42) are quantized once and repeated to fill the matrix, so
// building it costs little while the matrix is still far larger than the caches.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "loaders/ggml_types.h"
#include "loaders/quants.h"
#include "loaders/quants_q8a.h"
#include "loaders/quants_q8k.h"

namespace pinfer::bench {

constexpr int64_t kCols = 4096, kRows = 4096;
constexpr int64_t kDistinctRows = 64;  // quantized once, then tiled to fill the matrix

// kRows rows of row_bytes each (GgmlRowBytes(type, kCols)).
struct Matrix {
  size_t row_bytes;
  std::vector<uint8_t> data;
};

// The matrix of type t, built on first use and kept for the process (one per type).
inline const Matrix& WeightsOf(GgmlType t) {
  static std::vector<std::pair<GgmlType, Matrix>> cache;
  for (auto& [type, m] : cache) {
    if (type == t) return m;
  }
  std::mt19937 rng(42);
  std::normal_distribution<float> gauss(0.0f, 0.02f);
  std::vector<float> row(kCols);
  Matrix m{GgmlRowBytes(t, kCols), {}};
  m.data.resize(m.row_bytes * kRows);
  for (int64_t r = 0; r < kDistinctRows; ++r) {
    for (float& v : row) v = gauss(rng);
    QuantizeRow(t, row.data(), m.data.data() + r * m.row_bytes, kCols);
  }
  for (int64_t r = kDistinctRows; r < kRows; ++r) {
    std::memcpy(m.data.data() + r * m.row_bytes, m.data.data() + (r % kDistinctRows) * m.row_bytes,
                m.row_bytes);
  }
  cache.emplace_back(t, std::move(m));
  return cache.back().second;
}

// The K-quants take Q8_K activations, the 32-value formats Q8A.
inline bool IsKQuant(GgmlType t) {
  return t == GgmlType::kQ4_K || t == GgmlType::kQ5_K || t == GgmlType::kQ6_K;
}

// Bytes of one token's activation row for weights of type t.
inline int64_t ActRowBytes(GgmlType t) {
  return IsKQuant(t) ? quants::Q8KRowBytes(kCols) : quants::Q8ARowBytes(kCols);
}

// n_tok token rows of kCols Gaussian values (seed 7), quantized by the scalar quantizer of the
// activation format that weights of type t take.
inline std::vector<uint8_t> Activations(GgmlType t, int n_tok) {
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(kCols);
  const int64_t act_row = ActRowBytes(t);
  std::vector<uint8_t> acts(act_row * n_tok);
  for (int i = 0; i < n_tok; ++i) {
    for (float& v : x) v = gauss(rng);
    if (IsKQuant(t)) {
      quants::ScalarKQuantKernels().quantize_q8k(x.data(), acts.data() + i * act_row, kCols);
    } else {
      quants::ScalarQ8AKernels().quantize(x.data(), acts.data() + i * act_row, kCols);
    }
  }
  return acts;
}

}  // namespace pinfer::bench
