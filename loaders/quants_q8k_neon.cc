// The NEON set of quants_q8k.h (AArch64 only).
#include "loaders/quants_q8k.h"

namespace pinfer::quants {
const KQuantKernels* NeonKQuantKernels() { return nullptr; }
}  // namespace pinfer::quants
