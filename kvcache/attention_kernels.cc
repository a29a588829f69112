// Which attention kernel set this CPU runs: asked once, from what the CPU reports.
#include "kvcache/attention_kernels.h"

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace pinfer::attention {

bool CpuRunsAvx2Fma16c() {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
  // F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

namespace {

// NEON is part of the AArch64 Linux ABI; the kernel still reports it (HWCAP_ASIMD).
bool CpuRunsNeon() {
#if defined(__aarch64__) && defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
#else
  return false;
#endif
}

}  // namespace

int AvailableAttentionKernels(const AttentionKernels** sets, int max_sets) {
  int n = 0;
  if (const AttentionKernels* avx2 = Avx2AttentionKernels(); avx2 && CpuRunsAvx2Fma16c()) {
    if (n < max_sets) sets[n++] = avx2;
  }
  if (const AttentionKernels* neon = NeonAttentionKernels(); neon && CpuRunsNeon()) {
    if (n < max_sets) sets[n++] = neon;
  }
  if (n < max_sets) sets[n++] = &ScalarAttentionKernels();
  return n;
}

const AttentionKernels& ActiveAttentionKernels() {
  static const AttentionKernels* const active = [] {
    const AttentionKernels* best = nullptr;
    AvailableAttentionKernels(&best, 1);
    return best;
  }();
  return *active;
}

}  // namespace pinfer::attention
