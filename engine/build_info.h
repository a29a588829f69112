// What this build is: version, CPU SIMD baseline, and whether the CUDA backend is compiled in.
#pragma once

#include <string>

namespace pinfer {

// e.g. "0.1.0 (cpu: x86-64-v3 avx2 fma f16c; cuda: not built)"
std::string BuildInfo();

}  // namespace pinfer
