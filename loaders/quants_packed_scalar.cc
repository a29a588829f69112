// The scalar reference of quants_packed.h's kernels: per (row, token) pair, the per-block
// contract in plain C++ (every other set matches it bit for bit).
#include <cmath>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_packed.h"
#include "loaders/quants_q8a.h"

namespace pinfer::quants {
namespace {

// Row i's code j (0..31) of packed block p, as stored in the original format (unsigned nibble
// for Q4_0 / Q4_1, signed for Q8_0).
template <GgmlType T>
int Code(const uint8_t* qs, int i, int j) {
  if constexpr (T == GgmlType::kQ8_0) {
    return static_cast<int>(qs[32 * (j / 4) + 4 * i + j % 4]) - 128;
  } else {
    const int jj = j % 16;
    const uint8_t byte = qs[32 * (jj / 4) + 4 * i + jj % 4];
    return j < 16 ? byte & 0x0f : byte >> 4;
  }
}

template <GgmlType T, typename Block>
void PackedDotScalar(const void* w, int64_t n_rows, const void* acts, int64_t act_row_bytes,
                     int n_tok, int64_t n, float* y, int64_t y_row_stride) {
  const int64_t nb = n / kQK8A;
  const auto* groups = static_cast<const Block*>(w);
  for (int64_t r = 0; r < n_rows; ++r) {
    const Block* g = groups + r / kPackRows * nb;
    const int i = static_cast<int>(r % kPackRows);
    for (int t = 0; t < n_tok; ++t) {
      const auto* a =
          reinterpret_cast<const BlockQ8A*>(static_cast<const uint8_t*>(acts) + t * act_row_bytes);
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t dot = 0;
        for (int j = 0; j < 32; ++j) dot += Code<T>(g[b].qs, i, j) * a[b].qs[j];
        if constexpr (T == GgmlType::kQ4_0) dot -= 8 * a[b].sum;
        acc = std::fma(Fp16ToFp32(g[b].d[i]) * a[b].d, static_cast<float>(dot), acc);
        if constexpr (T == GgmlType::kQ4_1) {
          acc = std::fma(Fp16ToFp32(g[b].m[i]) * a[b].d, static_cast<float>(a[b].sum), acc);
        }
      }
      y[t * y_row_stride + r] = acc;
    }
  }
}

constexpr PackedQ8AKernels kScalar = {"scalar", PackedDotScalar<GgmlType::kQ4_0, BlockQ4_0x8>,
                                      PackedDotScalar<GgmlType::kQ4_1, BlockQ4_1x8>,
                                      PackedDotScalar<GgmlType::kQ8_0, BlockQ8_0x8>};

}  // namespace

const PackedQ8AKernels& ScalarPackedQ8AKernels() { return kScalar; }

}  // namespace pinfer::quants
