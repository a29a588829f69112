// Element-wise pieces of the Llama block on float32 activations: RMSNorm, SwiGLU and bias
// add. Same formulas as engine/cpu/ops.cc. (RoPE rides along with the KV write,
// kv_kernels.cu; residual adds are the GEMVs' accumulate.)
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/pdl.cuh"

namespace pinfer::cuda {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// One block per output row: sum of squares reduced in the block, then the scaled copy.
__global__ void RmsNormKernel(const float* __restrict__ x, const int32_t* rows,
                              const float* __restrict__ w, int dim, float eps,
                              float* __restrict__ out) {
  AllowDependentLaunch();
  __shared__ float partial[kThreads / 32];
  const int i = blockIdx.x;
  const float* xr = x + static_cast<int64_t>(rows ? rows[i] : i) * dim;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) ss += xr[c] * xr[c];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int k = 0; k < kThreads / 32; ++k) total += partial[k];
  const float scale = 1.0f / sqrtf(total / static_cast<float>(dim) + eps);
  float* o = out + static_cast<int64_t>(i) * dim;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) o[c] = xr[c] * scale * w[c];
}

__global__ void SwiGluKernel(float* gate, const float* __restrict__ up, int64_t n) {
  AllowDependentLaunch();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  gate[i] = g / (1.0f + expf(-g)) * up[i];
}

__global__ void AddBiasKernel(float* x, const float* __restrict__ b, int64_t n, int width) {
  AllowDependentLaunch();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += b[i % width];
}

}  // namespace

cudaError_t LaunchRmsNorm(const float* x, const int32_t* rows, const float* w, int n_rows, int dim,
                          float eps, float* out, cudaStream_t s) {
  if (n_rows <= 0) return cudaSuccess;
  PINFER_LAUNCH(RmsNormKernel, n_rows, kThreads, 0, s)(x, rows, w, dim, eps, out);
  return cudaGetLastError();
}

cudaError_t LaunchSwiGlu(float* gate, const float* up, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  PINFER_LAUNCH(SwiGluKernel, Blocks(n), kThreads, 0, s)(gate, up, n);
  return cudaGetLastError();
}

cudaError_t LaunchAddBias(float* x, const float* b, int n_rows, int width, cudaStream_t s) {
  const int64_t n = static_cast<int64_t>(n_rows) * width;
  if (n <= 0) return cudaSuccess;
  PINFER_LAUNCH(AddBiasKernel, Blocks(n), kThreads, 0, s)(x, b, n, width);
  return cudaGetLastError();
}

}  // namespace pinfer::cuda
