// Kernels that read weights in their storage type: embedding lookup, the decode GEMV
// (dequantize and multiply, a warp per weight row) and the dequantization of row tiles to
// half/bfloat16 for cuBLAS.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/dequant.cuh"
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

// One warp per weight row; every lane walks the row in groups of 8 values (block types) or
// single values (float types), multiplying each against up to kMaxGemvTokens inputs.
template <int kType>
__global__ void GemvKernel(DeviceMatrix w, const float* __restrict__ x, int n,
                           float* __restrict__ y, int64_t ldy) {
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
#pragma unroll
      for (int t = 0; t < kMaxGemvTokens; ++t) {
        if (t < n) {
          const float4* xp = reinterpret_cast<const float4*>(x + t * cols + g * 8);
          const float4 a = __ldg(xp), b = __ldg(xp + 1);
          acc[t] += v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * b.x + v[5] * b.y +
                    v[6] * b.z + v[7] * b.w;
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kMaxGemvTokens; ++t) {
    if (t < n) {
      const float s = WarpSum(acc[t]);
      if (lane == 0) y[t * ldy + r] = s;
    }
  }
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

cudaError_t LaunchGemv(const DeviceMatrix& w, const float* x, int n, float* y, int64_t ldy,
                       cudaStream_t s) {
  if (n <= 0 || w.rows == 0) return cudaSuccess;
  if (n > kMaxGemvTokens) return cudaErrorInvalidValue;
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
