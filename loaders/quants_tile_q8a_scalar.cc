// The portable reference of quants_tile.h's Q8A tiles: each weight row through the scalar row
// kernel of its format (quants_q8a_scalar.cc) over all the tokens, so the tile's values are the
// row kernel's by construction.
#include "loaders/quants_q8a.h"
#include "loaders/quants_tile.h"

namespace pinfer::quants {
namespace {

template <RowDotFn Q8AKernels::*kDot>
void TileDot(const void* w, int64_t w_row_bytes, int n_rows, const void* acts,
             int64_t act_row_bytes, int n_tok, int64_t n, float* y, int64_t y_row_stride) {
  const RowDotFn dot = ScalarQ8AKernels().*kDot;
  const auto* rows = static_cast<const uint8_t*>(w);
  for (int r = 0; r < n_rows; ++r)
    dot(rows + r * w_row_bytes, acts, act_row_bytes, n_tok, n, y + r, y_row_stride);
}

}  // namespace

const Q8ATileKernels& ScalarQ8ATileKernels() {
  static constexpr Q8ATileKernels kSet{"scalar",
                                       TileDot<&Q8AKernels::q4_0>,
                                       TileDot<&Q8AKernels::q4_1>,
                                       TileDot<&Q8AKernels::q5_0>,
                                       TileDot<&Q8AKernels::q5_1>,
                                       TileDot<&Q8AKernels::q8_0>};
  return kSet;
}

}  // namespace pinfer::quants
