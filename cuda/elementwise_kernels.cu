// Element-wise pieces of the Llama block on float32 activations: RMSNorm, RoPE (adjacent
// pairs and halves), SwiGLU, residual add and bias add. Same formulas as engine/ops.cc.
#include "cuda/kernels.h"
#include "cuda/pdl.cuh"
#include "cuda/rope.cuh"

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

// One thread per (token, head, pair) of rope.q (heads [0, n_heads)) and then of k (heads
// [n_heads, n_heads + n_kv_heads)); k may be nullptr (n_kv_heads 0).
__global__ void RopeKernel(RopeArgs rope, float* k, int n_tokens, int n_kv_heads) {
  AllowDependentLaunch();
  const int half = rope.head_dim / 2, n_heads = rope.n_heads;
  const int heads = n_heads + n_kv_heads;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(n_tokens) * heads * half) return;
  const int i = static_cast<int>(idx % half);
  const int64_t th = idx / half;  // token x heads + head
  const int t = static_cast<int>(th / heads), head = static_cast<int>(th % heads);
  int a, b;
  float c, s;
  RopePair(rope, i, rope.positions[t], &a, &b, &c, &s);
  float* v = head < n_heads
                 ? rope.q + (static_cast<int64_t>(t) * n_heads + head) * rope.head_dim
                 : k + (static_cast<int64_t>(t) * n_kv_heads + (head - n_heads)) * rope.head_dim;
  const float x0 = v[a], x1 = v[b];
  v[a] = x0 * c - x1 * s;
  v[b] = x0 * s + x1 * c;
}

__global__ void SwiGluKernel(float* gate, const float* __restrict__ up, int64_t n) {
  AllowDependentLaunch();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  gate[i] = g / (1.0f + expf(-g)) * up[i];
}

__global__ void AddKernel(float* x, const float* __restrict__ y, int64_t n) {
  AllowDependentLaunch();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
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
  RmsNormKernel<<<n_rows, kThreads, 0, s>>>(x, rows, w, dim, eps, out);
  return cudaGetLastError();
}

cudaError_t LaunchRope(float* vec, int n_tokens, int n_heads, int head_dim,
                       const int32_t* positions, const float* freqs, bool halves, cudaStream_t s,
                       float freq_scale, const float* freq_factors) {
  return LaunchRopeQK(vec, n_heads, nullptr, 0, n_tokens, head_dim, positions, freqs, halves, s,
                      freq_scale, freq_factors);
}

cudaError_t LaunchRopeQK(float* q, int n_heads, float* k, int n_kv_heads, int n_tokens,
                         int head_dim, const int32_t* positions, const float* freqs, bool halves,
                         cudaStream_t s, float freq_scale, const float* freq_factors) {
  const int64_t n = static_cast<int64_t>(n_tokens) * (n_heads + n_kv_heads) * (head_dim / 2);
  if (n <= 0) return cudaSuccess;
  const RopeArgs rope =
      MakeRopeArgs(q, n_heads, head_dim, positions, freqs, halves, freq_scale, freq_factors);
  RopeKernel<<<Blocks(n), kThreads, 0, s>>>(rope, k, n_tokens, n_kv_heads);
  return cudaGetLastError();
}

cudaError_t LaunchSwiGlu(float* gate, const float* up, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  SwiGluKernel<<<Blocks(n), kThreads, 0, s>>>(gate, up, n);
  return cudaGetLastError();
}

cudaError_t LaunchAdd(float* x, const float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  AddKernel<<<Blocks(n), kThreads, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchAddBias(float* x, const float* b, int n_rows, int width, cudaStream_t s) {
  const int64_t n = static_cast<int64_t>(n_rows) * width;
  if (n <= 0) return cudaSuccess;
  AddBiasKernel<<<Blocks(n), kThreads, 0, s>>>(x, b, n, width);
  return cudaGetLastError();
}

}  // namespace pinfer::cuda
