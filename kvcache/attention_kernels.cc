// Which attention kernel set this CPU runs: the process's kernel set (loaders/kernel_set.h).
#include "kvcache/attention_kernels.h"

#include "loaders/kernel_set.h"

namespace pinfer::attention {

int AvailableAttentionKernels(const AttentionKernels** sets, int max_sets) {
  int n = 0;
  if (const AttentionKernels* avx2 = Avx2AttentionKernels();
      avx2 && KernelSetRuns(KernelSet::kAvx2)) {
    if (n < max_sets) sets[n++] = avx2;
  }
  if (const AttentionKernels* neon = NeonAttentionKernels();
      neon && KernelSetRuns(KernelSet::kNeon)) {
    if (n < max_sets) sets[n++] = neon;
  }
  if (n < max_sets) sets[n++] = &ScalarAttentionKernels();
  return n;
}

const AttentionKernels& AttentionKernelsFor(KernelSet s) {
  const AttentionKernels* k = nullptr;
  if (UsesAvx2Kernels(s)) k = Avx2AttentionKernels();
  if (s == KernelSet::kNeon) k = NeonAttentionKernels();
  return k != nullptr ? *k : ScalarAttentionKernels();
}

const AttentionKernels& ActiveAttentionKernels() {
  static const AttentionKernels* const active = &AttentionKernelsFor(ActiveKernelSet());
  return *active;
}

}  // namespace pinfer::attention
