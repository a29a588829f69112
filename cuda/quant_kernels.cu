// Kernels that read weights in their storage type: embedding lookup, the decode GEMV
// (dequantize and multiply, a warp per weight row) and the dequantization of row tiles to
// half/bfloat16 for cuBLAS.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/dequant.cuh"
#include "cuda/gemv_units.cuh"
#include "cuda/kernels.h"

namespace pinfer::cuda {
namespace {

constexpr int kGemvWarps = 4;
constexpr int kThreads = 256;

unsigned Blocks(int64_t n, int per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// ---- the decode GEMV: y[t][r] = sum_c W[r][c] x[t][c], t < n <= kMaxGemvTokens ----
// A warp per weight row; the lanes' work is in gemv_units.cuh.

// Writes the warp's sums: y[t * ldy + r].
template <int kMaxT>
__device__ __forceinline__ void StoreSums(float (&acc)[kMaxT], int n, int lane, int64_t r,
                                          float* __restrict__ y, int64_t ldy) {
#pragma unroll
  for (int t = 0; t < kMaxT; ++t) {
    if (t < n) {
      const float s = WarpSum(acc[t]);
      if (lane == 0) y[t * ldy + r] = s;
    }
  }
}

template <int kType, int kUnitBlocks, bool kWords, int kMaxT>
__global__ void __launch_bounds__(32 * kGemvWarps)
    GemvLegacyKernel(DeviceMatrix w, const float* __restrict__ x, int n, float* __restrict__ y,
                     int64_t ldy) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (r >= w.rows) return;  // the whole warp: r is the same for its lanes
  float acc[kMaxT];
#pragma unroll
  for (int t = 0; t < kMaxT; ++t) acc[t] = 0.0f;
  gemv::LegacyLane<kType, kUnitBlocks, kWords>(w.data + r * static_cast<int64_t>(w.row_bytes), x,
                                               w.cols, n, lane, 32, acc);
  StoreSums(acc, n, lane, r, y, ldy);
}

template <int kType, int kMaxT>
__global__ void __launch_bounds__(32 * kGemvWarps)
    GemvKKernel(DeviceMatrix w, const float* __restrict__ x, int n, float* __restrict__ y,
                int64_t ldy) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (r >= w.rows) return;
  float acc[kMaxT];
#pragma unroll
  for (int t = 0; t < kMaxT; ++t) acc[t] = 0.0f;
  gemv::KLane<kType>(w.data + r * static_cast<int64_t>(w.row_bytes), x, w.cols, n, lane, 32, acc);
  StoreSums(acc, n, lane, r, y, ldy);
}

// Float types (and any block layout the kernels above do not take): a lane per value (float
// types) or per group of 8 values (Dequant8), for up to kMaxGemvTokens tokens.
template <int kType>
__global__ void __launch_bounds__(32 * kGemvWarps)
    GemvKernel(DeviceMatrix w, const float* __restrict__ x, int n, float* __restrict__ y,
               int64_t ldy) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (r >= w.rows) return;
  const uint8_t* row = w.data + r * static_cast<int64_t>(w.row_bytes);
  const int64_t cols = w.cols;
  float acc[kMaxGemvTokens];
#pragma unroll
  for (int t = 0; t < kMaxGemvTokens; ++t) acc[t] = 0.0f;
  if constexpr (kType == kWF32 || kType == kWF16 || kType == kWBF16) {
    for (int64_t c = lane; c < cols; c += 32) {
      const float wv = LoadFloatType(kType, row, c);
#pragma unroll
      for (int t = 0; t < kMaxGemvTokens; ++t) {
        if (t < n) acc[t] += wv * __ldg(x + t * cols + c);
      }
    }
  } else {
    const int64_t groups = cols / 8;
    for (int64_t g = lane; g < groups; g += 32) {
      float v[8];
      Dequant8(kType, row, g, v);
      gemv::Fma8(acc, v, x, cols, n, g * 8);
    }
  }
  StoreSums(acc, n, lane, r, y, ldy);
}

template <typename Out>
__device__ __forceinline__ Out Convert(float v);
template <>
__device__ __forceinline__ float Convert<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half Convert<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 Convert<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// out[i][c] = dequant(row src_row(i))[c]: one thread per group of 8 values (block types) or
// per value (float types). tokens == nullptr: src_row(i) = row0 + i.
template <typename Out>
__global__ void DequantRowsKernel(DeviceMatrix w, const int32_t* tokens, int64_t row0,
                                  int64_t n_rows, Out* __restrict__ out) {
  const bool flt = IsFloatType(w.type);
  const int64_t per_row = flt ? w.cols : w.cols / 8;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= per_row * n_rows) return;
  const int64_t i = idx / per_row, g = idx % per_row;
  const int64_t src = tokens ? tokens[i] : row0 + i;
  const uint8_t* row = w.data + src * static_cast<int64_t>(w.row_bytes);
  Out* o = out + i * w.cols;
  if (flt) {
    o[g] = Convert<Out>(LoadFloatType(w.type, row, g));
    return;
  }
  float v[8];
  Dequant8(w.type, row, g, v);
#pragma unroll
  for (int k = 0; k < 8; ++k) o[g * 8 + k] = Convert<Out>(v[k]);
}

template <typename Out>
__global__ void ToHalfKernel(const float* __restrict__ x, int64_t n, Out* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = Convert<Out>(x[i]);
}

int64_t ThreadsPerRow(const DeviceMatrix& w) {
  const bool flt = w.type == kWF32 || w.type == kWF16 || w.type == kWBF16;
  return flt ? w.cols : w.cols / 8;
}

}  // namespace

bool WeightTypeSupported(int type) {
  switch (type) {
    case kWF32:
    case kWF16:
    case kWBF16:
    case kWQ4_0:
    case kWQ4_1:
    case kWQ5_0:
    case kWQ5_1:
    case kWQ8_0:
    case kWQ4_K:
    case kWQ5_K:
    case kWQ6_K:
      return true;
    default:
      return false;
  }
}

cudaError_t LaunchEmbedding(const DeviceMatrix& emb, const int32_t* tokens, int n, float* x,
                            cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  const int64_t total = ThreadsPerRow(emb) * n;
  DequantRowsKernel<float><<<Blocks(total, kThreads), kThreads, 0, s>>>(emb, tokens, 0, n, x);
  return cudaGetLastError();
}

namespace {

// The kernel for w at a token count of at most kMaxT; false when no vectorised kernel takes
// w's type and layout (the caller then uses GemvKernel).
template <int kMaxT>
bool LaunchVectorGemv(const DeviceMatrix& w, const float* x, int n, float* y, int64_t ldy,
                      cudaStream_t s) {
  const dim3 grid(Blocks(w.rows, kGemvWarps)), block(32 * kGemvWarps);
  const uintptr_t base = reinterpret_cast<uintptr_t>(w.data);
  // 4-byte loads: every row starts 4-byte aligned. Then 18/22/34-byte blocks are read in
  // pairs (a row holds an even number of them: row_bytes % 4 == 0 says so).
  const bool words = base % 4 == 0 && w.row_bytes % 4 == 0;
  const bool vec16 = base % 16 == 0 && w.row_bytes % 16 == 0;
  if (base % 2 != 0 || w.row_bytes % 2 != 0) return false;
  switch (w.type) {
#define PINFER_LEGACY(T)                                                              \
  case T:                                                                             \
    if constexpr (gemv::LegacyBlockBytes(T) % 4 == 0) {                               \
      if (words) {                                                                    \
        GemvLegacyKernel<T, 1, true, kMaxT><<<grid, block, 0, s>>>(w, x, n, y, ldy);  \
      } else {                                                                        \
        GemvLegacyKernel<T, 1, false, kMaxT><<<grid, block, 0, s>>>(w, x, n, y, ldy); \
      }                                                                               \
    } else {                                                                          \
      if (words) {                                                                    \
        GemvLegacyKernel<T, 2, true, kMaxT><<<grid, block, 0, s>>>(w, x, n, y, ldy);  \
      } else {                                                                        \
        GemvLegacyKernel<T, 1, false, kMaxT><<<grid, block, 0, s>>>(w, x, n, y, ldy); \
      }                                                                               \
    }                                                                                 \
    return true;
    PINFER_LEGACY(kWQ4_0)
    PINFER_LEGACY(kWQ4_1)
    PINFER_LEGACY(kWQ5_0)
    PINFER_LEGACY(kWQ5_1)
    PINFER_LEGACY(kWQ8_0)
#undef PINFER_LEGACY
    case kWQ4_K:
      if (!vec16) return false;
      GemvKKernel<kWQ4_K, kMaxT><<<grid, block, 0, s>>>(w, x, n, y, ldy);
      return true;
    case kWQ5_K:
      if (!vec16) return false;
      GemvKKernel<kWQ5_K, kMaxT><<<grid, block, 0, s>>>(w, x, n, y, ldy);
      return true;
    case kWQ6_K:
      GemvKKernel<kWQ6_K, kMaxT><<<grid, block, 0, s>>>(w, x, n, y, ldy);
      return true;
    default:
      return false;
  }
}

}  // namespace

cudaError_t LaunchGemv(const DeviceMatrix& w, const float* x, int n, float* y, int64_t ldy,
                       cudaStream_t s) {
  if (n <= 0 || w.rows == 0) return cudaSuccess;
  if (n > kMaxGemvTokens) return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) return cudaErrorMisalignedAddress;
  const bool vectorised = n == 1 ? LaunchVectorGemv<1>(w, x, n, y, ldy, s)
                                 : LaunchVectorGemv<kMaxGemvTokens>(w, x, n, y, ldy, s);
  if (vectorised) return cudaGetLastError();
  const dim3 grid(Blocks(w.rows, kGemvWarps)), block(32 * kGemvWarps);
  switch (w.type) {
#define PINFER_GEMV_CASE(T)                                \
  case T:                                                  \
    GemvKernel<T><<<grid, block, 0, s>>>(w, x, n, y, ldy); \
    break;
    PINFER_GEMV_CASE(kWF32)
    PINFER_GEMV_CASE(kWF16)
    PINFER_GEMV_CASE(kWBF16)
    PINFER_GEMV_CASE(kWQ4_0)
    PINFER_GEMV_CASE(kWQ4_1)
    PINFER_GEMV_CASE(kWQ5_0)
    PINFER_GEMV_CASE(kWQ5_1)
    PINFER_GEMV_CASE(kWQ8_0)
    PINFER_GEMV_CASE(kWQ4_K)
    PINFER_GEMV_CASE(kWQ5_K)
    PINFER_GEMV_CASE(kWQ6_K)
#undef PINFER_GEMV_CASE
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchDequantRows(const DeviceMatrix& w, int64_t row0, int64_t n_rows, void* out,
                              bool bf16, cudaStream_t s) {
  if (n_rows <= 0) return cudaSuccess;
  const int64_t total = ThreadsPerRow(w) * n_rows;
  if (bf16) {
    DequantRowsKernel<__nv_bfloat16><<<Blocks(total, kThreads), kThreads, 0, s>>>(
        w, nullptr, row0, n_rows, static_cast<__nv_bfloat16*>(out));
  } else {
    DequantRowsKernel<__half><<<Blocks(total, kThreads), kThreads, 0, s>>>(
        w, nullptr, row0, n_rows, static_cast<__half*>(out));
  }
  return cudaGetLastError();
}

cudaError_t LaunchToHalf(const float* x, int64_t n, void* out, bool bf16, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  if (bf16) {
    ToHalfKernel<<<Blocks(n, kThreads), kThreads, 0, s>>>(x, n, static_cast<__nv_bfloat16*>(out));
  } else {
    ToHalfKernel<<<Blocks(n, kThreads), kThreads, 0, s>>>(x, n, static_cast<__half*>(out));
  }
  return cudaGetLastError();
}

}  // namespace pinfer::cuda
