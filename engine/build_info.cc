#include "engine/build_info.h"

#include "absl/strings/str_cat.h"

namespace pinfer {

std::string BuildInfo() {
  std::string simd = PAGEDINFER_SIMD_LEVEL;
#if defined(__AVX512F__)
  absl::StrAppend(&simd, " avx512f");
#endif
#if defined(__AVX2__)
  absl::StrAppend(&simd, " avx2");
#endif
#if defined(__FMA__)
  absl::StrAppend(&simd, " fma");
#endif
#if defined(__F16C__)
  absl::StrAppend(&simd, " f16c");
#endif
#if defined(PAGEDINFER_WITH_CUDA)
  const char* cuda = "cuda: built";
#else
  const char* cuda = "cuda: not built";
#endif
  return absl::StrCat(PAGEDINFER_VERSION, " (cpu: ", simd, "; ", cuda, ")");
}

}  // namespace pinfer
