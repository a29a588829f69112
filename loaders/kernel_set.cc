// Which kernel set this process runs (kernel_set.h): cpuid / HWCAP, and PAGEDINFER_KERNELS.
#include "loaders/kernel_set.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "loaders/quants_packed.h"
#include "loaders/quants_q8a.h"

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace pinfer {

const char* KernelSetName(KernelSet s) {
  switch (s) {
    case KernelSet::kScalar:
      return "scalar";
    case KernelSet::kAvx2:
      return "avx2";
    case KernelSet::kAvxVnni:
      return "avxvnni";
    case KernelSet::kAvx512Vnni:
      return "avx512vnni";
    case KernelSet::kNeon:
      return "neon";
  }
  return "?";
}

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

bool CpuRunsAvxVnni() {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
  if (!CpuRunsAvx2Fma16c()) return false;  // also says the OS saves the YMM registers
  // AVX-VNNI from CPUID leaf 7 subleaf 1, EAX bit 4 (GCC 12 / clang 14 know
  // __builtin_cpu_supports("avxvnni"); older ones do not).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  return (eax & (1u << 4)) != 0;
#else
  return false;
#endif
}

bool CpuRunsAvx512Vnni() {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
  if (!CpuRunsAvx2Fma16c()) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // OSXSAVE (leaf 1, ECX bit 27), then XCR0: SSE, AVX, opmask, ZMM_Hi256 and Hi16_ZMM state
  // (bits 1, 2, 5, 6, 7) saved by the OS.
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 27)) == 0) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xe6u) != 0xe6u) return false;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool f = (ebx & (1u << 16)) != 0, bw = (ebx & (1u << 30)) != 0,
             vl = (ebx & (1u << 31)) != 0, vnni = (ecx & (1u << 11)) != 0;
  return f && bw && vl && vnni;
#else
  return false;
#endif
}

bool CpuRunsNeon() {
#if defined(__aarch64__) && defined(__linux__)
  // NEON is part of the AArch64 Linux ABI; the kernel still reports it (HWCAP_ASIMD).
  return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
#else
  return false;
#endif
}

bool CpuRunsNeonDotProd() {
#if defined(__aarch64__) && defined(__linux__)
  static const bool dot = CpuRunsNeon() && (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  return dot;
#else
  return false;
#endif
}

bool KernelSetRuns(KernelSet s) {
  switch (s) {
    case KernelSet::kScalar:
      return true;
    case KernelSet::kAvx2:
#if defined(__x86_64__) || defined(_M_X64)
      return CpuRunsAvx2Fma16c();
#else
      return false;
#endif
    case KernelSet::kAvxVnni:
      return quants::AvxVnniQ8AKernels() != nullptr && CpuRunsAvxVnni();
    case KernelSet::kAvx512Vnni:
      return quants::Avx512VnniPackedQ8AKernels() != nullptr && CpuRunsAvx512Vnni();
    case KernelSet::kNeon:
#if defined(__aarch64__)
      return CpuRunsNeon();
#else
      return false;
#endif
  }
  return false;
}

KernelSet BestKernelSet() {
  if (KernelSetRuns(KernelSet::kAvx512Vnni)) return KernelSet::kAvx512Vnni;
  if (KernelSetRuns(KernelSet::kAvxVnni)) return KernelSet::kAvxVnni;
  if (KernelSetRuns(KernelSet::kAvx2)) return KernelSet::kAvx2;
  if (KernelSetRuns(KernelSet::kNeon)) return KernelSet::kNeon;
  return KernelSet::kScalar;
}

absl::StatusOr<KernelSet> ParseKernelSet(const char* value) {
  if (value == nullptr || *value == '\0') return BestKernelSet();
  for (KernelSet s : kAllKernelSets) {
    if (std::strcmp(value, KernelSetName(s)) != 0) continue;
    if (KernelSetRuns(s)) return s;
    return absl::InvalidArgumentError(absl::StrCat(
        "PAGEDINFER_KERNELS=", value, ": this ",
        s == KernelSet::kAvx2 ? "CPU does not run AVX2 + FMA + F16C code (or this is not an "
                                "x86-64 build)"
        : s == KernelSet::kAvxVnni
            ? "CPU does not run AVX-VNNI + AVX2 + FMA + F16C code (or this build has no "
              "AVX-VNNI kernels)"
        : s == KernelSet::kAvx512Vnni
            ? "CPU does not run AVX-512 F/BW/VL/VNNI + AVX2 + FMA + F16C code, or the OS does "
              "not save the ZMM registers (or this build has no AVX-512 VNNI kernels)"
            : "build is not for AArch64 (or the CPU reports no NEON)",
        "; unset it to use the best set this CPU runs (", KernelSetName(BestKernelSet()),
        "), or set scalar"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "PAGEDINFER_KERNELS=", value,
      " is not a kernel set: use scalar, avx2, avxvnni, avx512vnni or neon, or leave it unset "
      "for the best set this CPU runs (",
      KernelSetName(BestKernelSet()), ")"));
}

absl::StatusOr<KernelSet> KernelSetFromEnvironment() {
  return ParseKernelSet(std::getenv("PAGEDINFER_KERNELS"));
}

KernelSet ActiveKernelSet() {
  static const KernelSet active = [] {
    absl::StatusOr<KernelSet> s = KernelSetFromEnvironment();
    if (s.ok()) return *s;
    std::fprintf(stderr, "pagedinfer: %s; using %s\n", std::string(s.status().message()).c_str(),
                 KernelSetName(BestKernelSet()));
    return BestKernelSet();
  }();
  return active;
}

}  // namespace pinfer
