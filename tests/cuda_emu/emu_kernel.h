// Force-included (-include) into every kernel source the emulator compiles: the device-side
// built-ins (thread and block indices, barriers, warp shuffles, read-only loads, intrinsics)
// and the emulator's PINFER_LAUNCH (cuda/launch.cuh): `PINFER_LAUNCH(kernel, grid, block,
// smem, stream)(args)` becomes `::emu::Launch(<a lambda calling kernel>, "kernel", grid,
// block, smem, stream)(args)`; the call inside the lambda deduces template arguments as a
// launch does, and [=] copies a kernel held in a variable (a graph may replay the launch).
//
// What it checks: each kernel's arithmetic and the launch rules (limits, barriers and
// shuffles every thread reaches, alignment, bounds, stream capture). What it does not: any
// concurrency. Blocks run one after another, and a block's threads are fibers that switch
// only at barriers and shuffles, so atomics are plain read-modify-writes and fences are
// no-ops: a race or a missing fence between blocks passes here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>

#include "tests/cuda_emu/emu_runtime.h"

#define PINFER_CUDA_EMU 1  // kernels leave out inline PTX
#define PINFER_LAUNCH(kernel, ...) \
  ::emu::Launch([=](auto&... a) { kernel(a...); }, #kernel, __VA_ARGS__)
#define __global__
#define __shared__ static  // one block runs at a time, all its threads on one OS thread
#define __CUDA_ARCH__ 900  // the device pass: take the kernels' device code paths

extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

namespace emu {

// Blocks until every thread of the block (kBlock) or every lane of the warp (kWarp) arrives.
enum class Scope { kBlock, kWarp };
void Barrier(Scope scope);
// Lane `src` of the calling warp's `value` (64 bits), every lane taking part.
uint64_t WarpExchange(uint64_t value, int src_lane, unsigned mask, const char* what);
void CheckAligned(const void* p, size_t align, const char* what);
// The calling thread's lane in its warp (threads numbered x first, then y, then z).
int LaneId();

struct LaunchConfig {
  dim3 grid, block;
  size_t smem = 0;
  cudaStream_t stream = nullptr;
};
// Runs body() once per thread of every block (or records that for a graph); `name` is the
// kernel's, for messages.
cudaError_t RunGrid(const char* name, const LaunchConfig& c, std::function<void()> body);

// `kernel` is a callable that calls the kernel with the arguments it gets.
template <typename Kernel>
class KernelLaunch {
 public:
  KernelLaunch(Kernel k, const char* name, LaunchConfig c) : k_(k), name_(name), c_(c) {}
  template <typename... A>
  void operator()(A&&... a) const {
    // The arguments are copied at launch (a graph replays these copies); the kernel's
    // parameters are initialised from them when each thread starts.
    std::tuple<std::decay_t<A>...> args(std::forward<A>(a)...);
    SetLastError(RunGrid(name_, c_, [k = k_, args]() mutable { std::apply(k, args); }));
  }

 private:
  Kernel k_;
  const char* name_;
  LaunchConfig c_;
};

template <typename Kernel>
KernelLaunch<Kernel> Launch(Kernel k, const char* name, dim3 grid, dim3 block, size_t smem = 0,
                            cudaStream_t s = nullptr) {
  return KernelLaunch<Kernel>(k, name, LaunchConfig{grid, block, smem, s});
}

}  // namespace emu

// Runs like a <<<>>> launch (the attributes change nothing here); returns the launch's error.
template <typename... P, typename... A>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* c, void (*kernel)(P...), A&&... args) {
  emu::Launch([=](auto&... a) { kernel(a...); }, "kernel (cudaLaunchKernelEx)", c->gridDim,
              c->blockDim, c->dynamicSmemBytes, c->stream)(std::forward<A>(args)...);
  return cudaPeekAtLastError();
}

namespace emu {

template <typename T>
uint64_t Bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "a shuffle of <= 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T>
T FromBits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

}  // namespace emu

inline void __syncthreads() { emu::Barrier(emu::Scope::kBlock); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::Barrier(emu::Scope::kWarp); }

template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const int lane = emu::LaneId();
  const int base = lane - lane % width;
  return emu::FromBits<T>(
      emu::WarpExchange(emu::Bits(v), base + ((src % width) + width) % width, mask, "__shfl_sync"));
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  const int lane = emu::LaneId();
  const int src = lane ^ lane_mask;
  const bool inside = src / width == lane / width;
  return emu::FromBits<T>(
      emu::WarpExchange(emu::Bits(v), inside ? src : lane, mask, "__shfl_xor_sync"));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = emu::LaneId();
  const int src = lane + static_cast<int>(delta);
  const bool inside = src / width == lane / width;
  return emu::FromBits<T>(
      emu::WarpExchange(emu::Bits(v), inside ? src : lane, mask, "__shfl_down_sync"));
}

template <typename T>
T __ldg(const T* p) {
  emu::CheckAligned(p, alignof(T), "__ldg");
  return *p;
}
template <typename T>
T __ldcg(const T* p) {
  emu::CheckAligned(p, alignof(T), "__ldcg");
  return *p;
}
// One block runs at a time, switching only at barriers: atomics are plain read-modify-writes
// and fences have nothing to order.
inline int atomicAdd(int* p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}
inline void __threadfence() {}

inline float __uint_as_float(unsigned int b) { return emu::FromBits<float>(b); }
inline unsigned int __float_as_uint(float f) { return static_cast<unsigned int>(emu::Bits(f)); }
// Rounded operations that must not fuse into an FMA (kernels are compiled -ffp-contract=off).
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __expf(float x) { return std::exp(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max(int64_t a, int64_t b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
