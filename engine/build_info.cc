#include "engine/build_info.h"

#include "absl/strings/str_cat.h"
#include "loaders/kernel_set.h"

namespace pinfer {

std::string BuildInfo() {
  // The CPU kernel set this process runs (chosen at run time), and the sets the CPU could run.
  std::string cpu = absl::StrCat("kernels ", KernelSetName(ActiveKernelSet()), " of");
  for (KernelSet s : kAllKernelSets) {
    if (KernelSetRuns(s)) absl::StrAppend(&cpu, " ", KernelSetName(s));
  }
  const std::string march = PAGEDINFER_SIMD_LEVEL;
  if (!march.empty()) absl::StrAppend(&cpu, "; built with -march=", march);
#if defined(PAGEDINFER_WITH_CUDA)
  const char* cuda = "cuda: built";
#else
  const char* cuda = "cuda: not built";
#endif
  return absl::StrCat(PAGEDINFER_VERSION, " (cpu: ", cpu, "; ", cuda, ")");
}

}  // namespace pinfer
