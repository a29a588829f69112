// A host emulator of the CUDA runtime subset pagedinfer uses, so that the CUDA backend's host
// code and kernels run (slowly, on the CPU) in CI machines without a GPU. It checks what a
// GPU would refuse or fault on, as far as a host can tell:
//   - device memory: allocations come from mmap with a PROT_NONE page after each one (rounded
//     up to 256 bytes), are poisoned with 0xFF bytes (NaN floats) and are counted against an
//     emulated capacity (PINFER_CUDA_EMU_MIB, default 4096); copies check their direction
//     against where each pointer lives;
//   - launches: grid and block limits; kernels run each thread of a block as a fiber, so
//     __syncthreads and full-warp shuffles are exact, and a barrier or shuffle that some
//     threads never reach is reported (a divergent barrier hangs or misbehaves on a GPU);
//     __ldg of a misaligned vector is reported;
//   - graphs: launches, copies and cuBLAS calls on a capturing stream are recorded and
//     replayed by cudaGraphLaunch with the arguments they had at capture; during a capture,
//     synchronous calls (cudaMalloc, cudaMemcpy, cudaStreamSynchronize, ...), the legacy
//     stream and copies from pageable host memory invalidate it, as CUDA's own rules say.
// A kernel fault is sticky, as on a GPU: every later call returns it.
// Not emulated: concurrency (every operation runs when issued, in order), timing, memory
// consistency between threads (fibers switch only at barriers), shared-memory limits, and
// cuBLAS's own numerics (emu_cublas.cc is a float32 reference GEMM).
#pragma once

#include <utility>

#include "tests/cuda_emu/emu_types.h"

const char* cudaGetErrorName(cudaError_t err);
const char* cudaGetErrorString(cudaError_t err);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
cudaError_t cudaDeviceSynchronize();

cudaError_t cudaMalloc(void** p, size_t bytes);
template <typename T>
cudaError_t cudaMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocHost(void** p, size_t bytes);
template <typename T>
cudaError_t cudaMallocHost(T** p, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void**>(p), bytes);
}
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s = nullptr);
cudaError_t cudaMemset(void* p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
// Events record the host clock when the stream reaches them (every operation runs when
// issued, so: when recorded); elapsed times are the emulator's, not a GPU's.
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

namespace emu {

// What the emulator saw, for its own tests.
struct Counters {
  int64_t ops_run = 0;       // kernels, copies and GEMMs run (eager or replayed)
  int64_t captured_ops = 0;  // operations recorded into graphs
  int64_t faults = 0;        // kernel faults reported
  size_t device_bytes = 0;   // device memory allocated now
};
Counters counters();
// Clears a sticky fault (tests of the fault detection only; a GPU context cannot do this).
void ResetForTest();

// The operation queue behind every stream: runs `op` now, or records it when `s` is being
// captured. `what` names it in messages. Returns the error the issuing call returns.
cudaError_t Submit(cudaStream_t s, const char* what, void (*run)(void*), void* state,
                   void (*destroy)(void*));
template <typename F>
cudaError_t Submit(cudaStream_t s, const char* what, F f) {
  F* state = new F(std::move(f));
  return Submit(
      s, what, [](void* p) { (*static_cast<F*>(p))(); }, state,
      [](void* p) { delete static_cast<F*>(p); });
}
// Whether [p, p + bytes) lies inside one device allocation.
bool IsDeviceRange(const void* p, size_t bytes);
// Records a launch-time error (as cudaGetLastError reports it) or a sticky kernel fault.
void SetLastError(cudaError_t err);
void Fault(cudaError_t err, const char* message);

}  // namespace emu
