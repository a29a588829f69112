// Programmatic dependent launch (Hopper, sm_90 and later): a kernel launched with the
// programmatic-stream-serialization attribute may start while the kernel before it in the
// stream is still running, once every block of that kernel has allowed it; it must not touch
// that kernel's results before WaitForPrerequisites. On older GPUs, on the host emulator and
// for kernels launched without the attribute these are no-ops.
#pragma once

namespace pinfer::cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(PINFER_CUDA_EMU)
#define PINFER_PDL 1
#endif

// Lets the next kernel of the stream start now if it was launched as a programmatic
// dependent (it still waits for this one's results before reading them).
__device__ __forceinline__ void AllowDependentLaunch() {
#if defined(PINFER_PDL)
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Returns once the kernels this one depends on have completed and their writes are
// visible; at once when it was launched the ordinary way.
__device__ __forceinline__ void WaitForPrerequisites() {
#if defined(PINFER_PDL)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Pulls the 128-byte line holding p into L2 (weights, which no kernel writes, can be read
// before WaitForPrerequisites).
__device__ __forceinline__ void PrefetchL2(const void* p) {
#if defined(__CUDA_ARCH__) && !defined(PINFER_CUDA_EMU)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

}  // namespace pinfer::cuda
