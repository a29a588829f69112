// The CPU backend's one choice of kernel set: the instruction set that the matmul, dot-product,
// dequantization and attention kernels run with, made once per process at run time.
//
// The build compiles every set it can (scalar always; AVX2 + FMA + F16C, AVX-VNNI and AVX-512
// VNNI on x86-64; NEON on AArch64), each in its own files under `#pragma GCC target` (no global
// -march), and this file picks one: the environment variable PAGEDINFER_KERNELS (scalar, avx2,
// avxvnni, avx512vnni, neon) when set and not empty, otherwise the best set this CPU runs (cpuid
// and XGETBV / the kernel's HWCAP). Every
// kernel family (loaders/quants.h's float kernels, the integer kernels of loaders/quants_int8.h,
// kvcache's attention kernels) follows the same choice, so a process never mixes sets.
//
// Numerics: within one set every contract of loaders/quants.h holds bit for bit; between sets
// results differ in the order of float additions only (see quants.h).
#pragma once

#include "absl/status/statusor.h"

namespace pinfer {

// kAvxVnni: the AVX2 set with the integer (Q8A row) kernels' u8 x s8 dots done by
// AVX-VNNI's 256-bit vpdpbusd; bit for bit the AVX2 set's results (its float, K-quant and
// attention kernels are the AVX2 ones).
// kAvx512Vnni: the packed Q8A kernels (quants_packed.h) with 512-bit vpdpbusd (AVX-512
// F/BW/VL/VNNI, the OS saving the ZMM state); every other family uses the AVX-VNNI set's tables
// (the AVX2 set's where the CPU lacks AVX-VNNI), bit for bit those sets' results.
enum class KernelSet { kScalar, kAvx2, kAvxVnni, kAvx512Vnni, kNeon };

// Every set, in the order --version lists them.
inline constexpr KernelSet kAllKernelSets[] = {KernelSet::kScalar, KernelSet::kAvx2,
                                               KernelSet::kAvxVnni, KernelSet::kAvx512Vnni,
                                               KernelSet::kNeon};

// "scalar", "avx2", "avxvnni", "avx512vnni", "neon".
const char* KernelSetName(KernelSet s);

// Whether this CPU (and OS) runs AVX2, FMA and F16C code: false on other architectures.
bool CpuRunsAvx2Fma16c();
// Whether this CPU runs AVX-VNNI (VEX, 256-bit) code besides AVX2 + FMA + F16C.
bool CpuRunsAvxVnni();
// Whether this CPU runs AVX-512 F/BW/VL/VNNI code besides AVX2 + FMA + F16C, with the OS
// saving the opmask and ZMM registers (XGETBV).
bool CpuRunsAvx512Vnni();
// Whether s runs the AVX2 float, K-quant and attention kernels (avx2, avxvnni, avx512vnni).
inline bool UsesAvx2Kernels(KernelSet s) {
  return s == KernelSet::kAvx2 || s == KernelSet::kAvxVnni || s == KernelSet::kAvx512Vnni;
}
// Whether this CPU runs AArch64 NEON code: false on other architectures.
bool CpuRunsNeon();
// Whether this CPU has AArch64's dot-product extension (SDOT / UDOT, HWCAP_ASIMDDP): the NEON
// packed kernels (quants_packed.h, quants_packed_k.h) choose their SDOT path by it.
bool CpuRunsNeonDotProd();

// Whether this build has set s and this CPU runs it (scalar: always).
bool KernelSetRuns(KernelSet s);

// The best set this build has and this CPU runs.
KernelSet BestKernelSet();

// The set named by a PAGEDINFER_KERNELS value: null or empty means BestKernelSet(). An error
// (InvalidArgument) names the sets when the value is not one of them, and says why when this
// build or CPU cannot run the one asked for.
absl::StatusOr<KernelSet> ParseKernelSet(const char* value);

// ParseKernelSet(getenv("PAGEDINFER_KERNELS")): the command-line tool checks it at start so a
// bad value ends the run with its message.
absl::StatusOr<KernelSet> KernelSetFromEnvironment();

// The set of this process, fixed at its first call: KernelSetFromEnvironment(), or, where that
// is an error (the tool has reported it already; a library user sees it on stderr once), the
// best set.
KernelSet ActiveKernelSet();

}  // namespace pinfer
