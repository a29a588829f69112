// The NEON set of quants_q8a.h. Not written yet: nullptr everywhere, so the neon kernel set
// runs the scalar integer kernels (bit for bit the same results; the header fixes them).
#include "loaders/quants_q8a.h"

namespace pinfer::quants {
const Q8AKernels* NeonQ8AKernels() { return nullptr; }
}  // namespace pinfer::quants
