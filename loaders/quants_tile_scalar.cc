// The portable reference of quants_tile.h: each weight row through the scalar row kernel of its
// format (quants_q8k_scalar.cc) over all the tokens, so the tile's values are the row kernel's
// by construction.
#include "loaders/quants_q8k.h"
#include "loaders/quants_tile.h"

namespace pinfer::quants {
namespace {

template <RowDotFn KQuantKernels::*kDot>
void TileDot(const void* w, int64_t w_row_bytes, int n_rows, const void* acts,
             int64_t act_row_bytes, int n_tok, int64_t n, float* y, int64_t y_row_stride) {
  const RowDotFn dot = ScalarKQuantKernels().*kDot;
  const auto* rows = static_cast<const uint8_t*>(w);
  for (int r = 0; r < n_rows; ++r)
    dot(rows + r * w_row_bytes, acts, act_row_bytes, n_tok, n, y + r, y_row_stride);
}

}  // namespace

const KQuantTileKernels& ScalarKQuantTileKernels() {
  static constexpr KQuantTileKernels kSet{"scalar", TileDot<&KQuantKernels::q4_k>,
                                          TileDot<&KQuantKernels::q5_k>,
                                          TileDot<&KQuantKernels::q6_k>};
  return kSet;
}

const KQuantTileKernels* KQuantTileKernelsFor(KernelSet s) {
  return UsesAvx2Kernels(s) ? Avx2KQuantTileKernels() : nullptr;
}

}  // namespace pinfer::quants
