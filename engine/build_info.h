// What this build is: version, CPU kernel set, and whether the CUDA backend is compiled in.
#pragma once

#include <string>

namespace pinfer {

// e.g. "0.1.0 (cpu: kernels avx2 of scalar avx2; cuda: not built)": the CPU kernel set in use
// (loaders/kernel_set.h) and the sets this CPU runs.
std::string BuildInfo();

}  // namespace pinfer
