// Kernels for the emulator's self-test: correct ones, and ones with the bugs the emulator
// must report. Launched through PINFER_LAUNCH (cuda/launch.cuh), like the backend's.
#include "cuda/launch.cuh"
#include "tests/cuda_emu/emu_selftest_kernels.h"

namespace emu_selftest {
namespace {

__global__ void RowSumsKernel(const float* x, int n, float* out) {
  __shared__ float partial[32];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += row[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) total += partial[w];
    out[blockIdx.x] = total;
  }
}

__global__ void ScaleKernel(const float* x, int n, float k, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * k;
}

__global__ void DivergentBarrierKernel(int live, float* out) {
  if (static_cast<int>(threadIdx.x) >= live) return;
  out[threadIdx.x] = 1.0f;
  __syncthreads();
}

__global__ void PartialShuffleKernel(int live, float* out) {
  if (static_cast<int>(threadIdx.x) >= live) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

__global__ void VectorLoadKernel(const float* x, int offset, float* out) {
  const float4 v = __ldg(reinterpret_cast<const float4*>(x + offset));
  out[0] = v.x + v.y + v.z + v.w;
}

__global__ void CopyKernel(const float* x, int total, float* out) {
  for (int i = threadIdx.x; i < total; i += blockDim.x) out[i % 64] = x[i];
}

}  // namespace

cudaError_t LaunchRowSums(const float* x, int rows, int n, float* out, cudaStream_t s) {
  PINFER_LAUNCH(RowSumsKernel, rows, 128, 0, s)(x, n, out);
  return cudaGetLastError();
}

cudaError_t LaunchScale(const float* x, int n, float k, float* out, int threads, cudaStream_t s) {
  PINFER_LAUNCH(ScaleKernel, (n + threads - 1) / threads, threads, 0, s)(x, n, k, out);
  return cudaGetLastError();
}

cudaError_t LaunchDivergentBarrier(int live, float* out, cudaStream_t s) {
  PINFER_LAUNCH(DivergentBarrierKernel, 1, 64, 0, s)(live, out);
  return cudaGetLastError();
}

cudaError_t LaunchPartialShuffle(int live, float* out, cudaStream_t s) {
  PINFER_LAUNCH(PartialShuffleKernel, 1, 32, 0, s)(live, out);
  return cudaGetLastError();
}

cudaError_t LaunchVectorLoad(const float* x, int offset, float* out, cudaStream_t s) {
  PINFER_LAUNCH(VectorLoadKernel, 1, 1, 0, s)(x, offset, out);
  return cudaGetLastError();
}

cudaError_t LaunchCopy(const float* x, int n, int extra, float* out, cudaStream_t s) {
  PINFER_LAUNCH(CopyKernel, 1, 32, 0, s)(x, n + extra, out);
  return cudaGetLastError();
}

}  // namespace emu_selftest
