// KV cache kernels: encoding new K/V rows into the KV format (same bytes as
// kvcache/kv_codec.cc, with RoPE applied to K on the way) and causal paged attention that reads
// rows through block tables, decoding every format on the fly, with an online softmax.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/pdl.cuh"
#include "cuda/rope.cuh"

namespace pinfer::cuda {
namespace {

constexpr int kWriteThreads = 256;
constexpr int kAttnWarps = 8;
constexpr int kAttnUnroll = 4;  // positions a warp has in flight at once
constexpr int kMaxHeadDim = 256;
constexpr int kPerLane = kMaxHeadDim / 32;

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ void StoreU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// |x| (finite or not) -> e4m3 magnitude code: round to nearest even, saturate at 448.
__device__ __forceinline__ uint8_t E4M3Magnitude(float a) {
  if (!(a < 448.0f)) return 0x7e;
  if (a < 1.0f / 64.0f) return static_cast<uint8_t>(rintf(a * 512.0f));
  const uint32_t bits = __float_as_uint(a);
  const int e = static_cast<int>(bits >> 23) - 127;
  const uint32_t man = bits & 0x7fffff;
  uint32_t code = (static_cast<uint32_t>(e + 7) << 3) | (man >> 20);
  const uint32_t rem = man & 0xfffff, half = 0x80000;
  if (rem > half || (rem == half && (code & 1))) ++code;
  return static_cast<uint8_t>(code < 0x7e ? code : 0x7e);
}

__device__ __forceinline__ float E4M3Value(uint8_t c) {
  const int e = (c >> 3) & 0xf, m = c & 7;
  const float v =
      e == 0 ? static_cast<float>(m) / 512.0f : ldexpf(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return (c & 0x80) ? -v : v;
}

// q of token t rotated in place by one block's threads.
__device__ __forceinline__ void RopeQueryInPlace(const RopeArgs& rope, int t) {
  float* qt = rope.q + static_cast<int64_t>(t) * rope.n_heads * rope.head_dim;
  const int half = rope.head_dim / 2;
  for (int i = threadIdx.x; i < rope.n_heads * half; i += blockDim.x) {
    int a, b;
    float c, s;
    RopePair(rope, i % half, rope.positions[t], &a, &b, &c, &s);
    float* h = qt + (i / half) * rope.head_dim;
    const float x0 = h[a], x1 = h[b];
    h[a] = x0 * c - x1 * s;
    h[b] = x0 * s + x1 * c;
  }
}

// The row's encoders, one block of threads each; load(i) gives value i of the row.
// q8_0: a warp per block of 32 values, a lane per value; d = amax / 127.
template <typename Load>
__device__ __forceinline__ void EncodeQ8_0Row(const Load& load, int n, uint8_t* dst) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int b = warp; b < n / 32; b += warps) {
    const float x = load(b * 32 + lane);
    const float amax = WarpMax(fabsf(x));
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    uint8_t* blk = dst + b * 34;
    if (lane == 0) StoreU16(blk, __half_as_ushort(__float2half_rn(d)));
    blk[2 + lane] = static_cast<uint8_t>(static_cast<int8_t>(roundf(__fmul_rn(x, id))));
  }
}

// q4_0: d = (the value of largest magnitude) / -8, as the CPU's reference quantizer.
template <typename Load>
__device__ __forceinline__ void EncodeQ4_0Row(const Load& load, int n, uint8_t* dst) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int b = warp; b < n / 32; b += warps) {
    const float x = load(b * 32 + lane);
    // The value of largest magnitude, the first one on ties (as the CPU's scan).
    float best = fabsf(x);
    int at = lane;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oa = __shfl_xor_sync(0xffffffffu, at, o);
      if (ob > best || (ob == best && oa < at)) {
        best = ob;
        at = oa;
      }
    }
    // The CPU starts from max = +0 and only replaces it on a strictly larger magnitude,
    // so an all-zero block (some -0.0) keeps +0 and stores d = -0.0: do the same.
    const float picked = __shfl_sync(0xffffffffu, x, at);
    const float mx = best > 0.0f ? picked : 0.0f;
    const float d = __fdiv_rn(mx, -8.0f);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    int q = static_cast<int>(static_cast<int8_t>(__fadd_rn(__fmul_rn(x, id), 8.5f)));
    q = q < 15 ? q : 15;
    const int hi = __shfl_down_sync(0xffffffffu, q, 16);
    uint8_t* blk = dst + b * 18;
    if (lane == 0) StoreU16(blk, __half_as_ushort(__float2half_rn(d)));
    if (lane < 16) blk[2 + lane] = static_cast<uint8_t>(q | (hi << 4));
  }
}

// fp8 e4m3: the row's scale (amax / 448, a float32 in front of the row), then the codes.
template <typename Load>
__device__ __forceinline__ void EncodeFp8Row(const Load& load, int n, uint8_t* dst) {
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, warps = blockDim.x / 32;
  __shared__ float partial[kWriteThreads / 32];
  float amax = 0.0f;
  for (int i = tid; i < n; i += blockDim.x) amax = fmaxf(amax, fabsf(load(i)));
  amax = WarpMax(amax);
  if (lane == 0) partial[warp] = amax;
  __syncthreads();
  amax = 0.0f;
  for (int w = 0; w < warps; ++w) amax = fmaxf(amax, partial[w]);
  const float scale = __fdiv_rn(amax, 448.0f);
  if (tid == 0) {
    const uint32_t bits = __float_as_uint(scale);
    for (int i = 0; i < 4; ++i) dst[i] = static_cast<uint8_t>(bits >> (8 * i));
  }
  for (int i = tid; i < n; i += blockDim.x) {
    uint8_t c = 0;
    if (scale != 0.0f) {
      const float val = __fdiv_rn(load(i), scale);
      c = static_cast<uint8_t>(E4M3Magnitude(fabsf(val)) |
                               ((__float_as_uint(val) >> 31) ? 0x80 : 0));
    }
    dst[4 + i] = c;
  }
}

// One block per (token, k|v) row; a negative slot offset (a graph's padding row) writes
// nothing. K values are rotated on their way into the cache and blocks (token, 2) rotate the
// token's q in place.
__global__ void KvWriteKernel(KvLayerView kv, const float* __restrict__ k,
                              const float* __restrict__ v, const int64_t* slot_offset,
                              RopeArgs rope) {
  AllowDependentLaunch();
  const int t = blockIdx.x, which = blockIdx.y;
  if (which == 2) return RopeQueryInPlace(rope, t);
  const int64_t slot = slot_offset[t];
  if (slot < 0) return;  // the whole block: before any barrier
  const int n = kv.kv_dim;
  const float* src = (which == 0 ? k : v) + static_cast<int64_t>(t) * n;
  const bool roped = which == 0;
  const int pos = roped ? rope.positions[t] : 0;
  auto load = [&](int i) { return roped ? RopedAt(rope, src, i, pos) : src[i]; };
  uint8_t* dst = kv.base + slot + kv.layer_offset + (which ? kv.v_offset : 0);
  switch (kv.dtype) {
    case kKF32:
      for (int i = threadIdx.x; i < n; i += blockDim.x) reinterpret_cast<float*>(dst)[i] = load(i);
      return;
    case kKF16:
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        StoreU16(dst + 2 * i, __half_as_ushort(__float2half_rn(load(i))));
      }
      return;
    case kKBF16:
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        StoreU16(dst + 2 * i, __bfloat16_as_ushort(__float2bfloat16_rn(load(i))));
      }
      return;
    case kKQ8_0:
      return EncodeQ8_0Row(load, n, dst);
    case kKQ4_0:
      return EncodeQ4_0Row(load, n, dst);
    case kKFp8:
      return EncodeFp8Row(load, n, dst);
    default:
      return;
  }
}

// A 16-bit value at an even address.
__device__ __forceinline__ uint16_t LoadAlignedU16(const uint8_t* p) {
  return __ldg(reinterpret_cast<const unsigned short*>(p));
}

// Value i of an encoded row. Rows start at even addresses (row bytes are even: head_dim is),
// so 16-bit fields load whole; f32 rows are 4-byte aligned.
__device__ __forceinline__ float KvLoad(int dtype, const uint8_t* row, int i) {
  switch (dtype) {
    case kKF32:
      return __ldg(reinterpret_cast<const float*>(row) + i);
    case kKF16:
      return __half2float(__ushort_as_half(LoadAlignedU16(row + 2 * i)));
    case kKBF16:
      return __uint_as_float(static_cast<uint32_t>(LoadAlignedU16(row + 2 * i)) << 16);
    case kKQ8_0: {
      const uint8_t* blk = row + (i / 32) * 34;
      const float d = __half2float(__ushort_as_half(LoadAlignedU16(blk)));
      return d * static_cast<float>(static_cast<int8_t>(blk[2 + i % 32]));
    }
    case kKQ4_0: {
      const uint8_t* blk = row + (i / 32) * 18;
      const float d = __half2float(__ushort_as_half(LoadAlignedU16(blk)));
      const int j = i % 32;
      const int q = j < 16 ? (blk[2 + j] & 0xf) : (blk[2 + j - 16] >> 4);
      return d * static_cast<float>(q - 8);
    }
    case kKFp8: {
      const uint32_t bits =
          row[0] | (row[1] << 8) | (row[2] << 16) | (static_cast<uint32_t>(row[3]) << 24);
      return E4M3Value(row[4 + i]) * __uint_as_float(bits);
    }
    default:
      return 0.0f;
  }
}

// Split-K ("flash decoding") scratch: for each (token, head), a counter (an int in a float's
// place), then max_splits partial results [m, l, acc[hd]]. Offsets depend on the token
// index, not on the launch's token count, so launches of any size share one scratch.
__device__ __forceinline__ int64_t PairAt(int t, int h, int n_heads, int max_splits, int hd) {
  return (static_cast<int64_t>(t) * n_heads + h) *
         (1 + static_cast<int64_t>(max_splits) * (hd + 2));
}
__device__ __forceinline__ int64_t PartialAt(int t, int h, int n_heads, int split, int max_splits,
                                             int hd) {
  return PairAt(t, h, n_heads, max_splits, hd) + 1 + static_cast<int64_t>(split) * (hd + 2);
}

// The n partial records of one (token, head) (rec0, then every hd + 2 floats) -> out[hd],
// by the calling block's threads. The records were written by other blocks of this launch:
// read past L1 (__ldcg).
__device__ __forceinline__ void MergeSplits(const float* rec0, int hd, int n, float* out) {
  const int64_t stride = static_cast<int64_t>(hd) + 2;
  float mx = -INFINITY;
  for (int z = 0; z < n; ++z) mx = fmaxf(mx, __ldcg(rec0 + z * stride));
  float total = 0.0f;
  for (int z = 0; z < n; ++z) {
    total += __ldcg(rec0 + z * stride + 1) * expf(__ldcg(rec0 + z * stride) - mx);
  }
  for (int e = threadIdx.x; e < hd; e += blockDim.x) {
    float sum = 0.0f;
    for (int z = 0; z < n; ++z) {
      sum += __ldcg(rec0 + z * stride + 2 + e) * expf(__ldcg(rec0 + z * stride) - mx);
    }
    out[e] = sum / total;
  }
}

// The positions [begin, end) a block attends to: the whole context (max_splits == 0) or split
// `split` of length len = AttentionSplitLen(n_ctx, max_splits); false when that split starts
// past the context (the block has nothing to do).
struct AttnRange {
  int begin = 0, end = 0, len = 0;
};
__device__ __forceinline__ bool SplitOfContext(int n_ctx, int max_splits, int split, AttnRange* r) {
  r->len = max_splits > 0 ? AttentionSplitLen(n_ctx, max_splits) : n_ctx;
  r->begin = 0;
  r->end = n_ctx;
  if (max_splits > 0) {
    if (split * r->len >= n_ctx) return false;
    r->begin = split * r->len;
    r->end = min(n_ctx, r->begin + r->len);
  }
  return true;
}

// A warp's online softmax over its positions of r: warp w takes [w, w + kAttnUnroll) +
// k x kAttnWarps x kAttnUnroll, keeping kAttnUnroll positions' K and V loads in flight.
// Lane l holds values l, l + 32, ... of the query (qv) and of the weighted sum of V (acc);
// m and l are the running maximum score and sum of weights.
template <int kPerLane>
__device__ __forceinline__ void AttendPositions(const KvLayerView& kv, const int32_t* table,
                                                int col0, int hd, float scale, AttnRange r,
                                                const float (&qv)[kPerLane], float (&acc)[kPerLane],
                                                float* m_out, float* l_out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float m = -INFINITY, l = 0.0f;
  for (int p0 = r.begin + warp * kAttnUnroll; p0 < r.end; p0 += kAttnWarps * kAttnUnroll) {
    float s[kAttnUnroll], vv[kAttnUnroll][kPerLane];
#pragma unroll
    for (int u = 0; u < kAttnUnroll; ++u) {
      const int p = min(p0 + u, r.end - 1);  // a valid row; positions past the end are masked
      const uint8_t* krow = kv.base +
                            static_cast<size_t>(table[p / kv.block_size]) * kv.block_bytes +
                            kv.layer_offset + static_cast<size_t>(p % kv.block_size) * kv.row_bytes;
      const uint8_t* vrow = krow + kv.v_offset;
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + 32 * i;
        // V is loaded with K, before the softmax needs it, so both are in flight at once.
        vv[u][i] = e < hd ? KvLoad(kv.dtype, vrow, col0 + e) : 0.0f;
        if (e < hd) dot += qv[i] * KvLoad(kv.dtype, krow, col0 + e);
      }
      s[u] = dot;
    }
    float m_new = m;
#pragma unroll
    for (int u = 0; u < kAttnUnroll; ++u) {
      s[u] = WarpSum(s[u]) * scale;
      if (p0 + u < r.end) m_new = fmaxf(m_new, s[u]);
    }
    const float corr = expf(m - m_new);  // 0 on the first round (m = -inf)
    l *= corr;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[i] *= corr;
#pragma unroll
    for (int u = 0; u < kAttnUnroll; ++u) {
      if (p0 + u < r.end) {
        const float w = expf(s[u] - m_new);
        l += w;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) acc[i] += w * vv[u][i];
      }
    }
    m = m_new;
  }
  *m_out = m;
  *l_out = l;
}

// The block's warps combined: each warp's (m, l) and acc go to shared memory (s_acc rows of
// 32 x kPerLane); then every thread computes the block's maximum (*mx), the sum of weights
// rescaled to it (*total) and each warp's rescaling factor f[w].
template <int kPerLane>
__device__ __forceinline__ void CombineWarps(float m, float l, const float (&acc)[kPerLane],
                                             float* s_m, float* s_l, float (*s_acc)[32 * kPerLane],
                                             float* mx, float* total, float (&f)[kAttnWarps]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) s_acc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  *mx = -INFINITY;
  for (int w = 0; w < kAttnWarps; ++w) *mx = fmaxf(*mx, s_m[w]);
  *total = 0.0f;
  for (int w = 0; w < kAttnWarps; ++w) {
    f[w] = s_m[w] == -INFINITY ? 0.0f : expf(s_m[w] - *mx);
    *total += s_l[w] * f[w];
  }
}

// A split's partial result [mx, total, acc[hd]] into its record of the scratch; the last
// split of (t, h) to finish merges them all into out (CUDA's threadFenceReduction pattern)
// and leaves the counter at zero for the next launch or graph replay.
template <int kPerLane>
__device__ __forceinline__ void StoreSplitAndMerge(float (*s_acc)[32 * kPerLane],
                                                   const float (&f)[kAttnWarps], float mx,
                                                   float total, int t, int h, int n_heads, int hd,
                                                   int split, int max_splits, int n_splits,
                                                   float* partial, float* out) {
  int* counter = reinterpret_cast<int*>(partial + PairAt(t, h, n_heads, max_splits, hd));
  float* rec = partial + PartialAt(t, h, n_heads, split, max_splits, hd);
  if (threadIdx.x == 0) {
    rec[0] = mx;
    rec[1] = total;
  }
  for (int e = threadIdx.x; e < hd; e += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) sum += s_acc[w][e] * f[w];
    rec[2 + e] = sum;
  }
  __shared__ bool s_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    s_last = atomicAdd(counter, 1) == n_splits - 1;
    if (s_last) *counter = 0;
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  MergeSplits(partial + PartialAt(t, h, n_heads, 0, max_splits, hd), hd, n_splits,
              out + (static_cast<int64_t>(t) * n_heads + h) * hd);
}

// One block per (query token, query head, split of the context); its warps share the split
// (AttendPositions) and are combined at the end (CombineWarps). kPerLane = head_dim / 32
// rounded up (values per lane). max_splits == 0: one split, the whole context, written to
// out; else split z covers [z x len, (z + 1) x len) with len = AttentionSplitLen(context,
// max_splits), and leaves its partial result in `partial`; the last split of a (token, head)
// to finish merges them all into out.
template <int kPerLane>
__global__ void __launch_bounds__(32 * kAttnWarps)
    AttentionKernel(KvLayerView kv, const float* __restrict__ q, int n_heads, int n_kv_heads,
                    int hd, float scale, const int32_t* tables, const int32_t* table_start,
                    const int32_t* positions, float* __restrict__ out, int max_splits,
                    float* __restrict__ partial) {
  AllowDependentLaunch();
  __shared__ float s_m[kAttnWarps], s_l[kAttnWarps];
  __shared__ float s_acc[kAttnWarps][32 * kPerLane];
  const int t = blockIdx.x, h = blockIdx.y, lane = threadIdx.x % 32;
  const int kvh = h / (n_heads / n_kv_heads);
  const int n_ctx = positions[t] + 1;
  AttnRange r;
  if (!SplitOfContext(n_ctx, max_splits, blockIdx.z, &r)) return;  // the whole block: no barrier
  const float* qh = q + (static_cast<int64_t>(t) * n_heads + h) * hd;
  float qv[kPerLane], acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + 32 * i;
    qv[i] = e < hd ? qh[e] : 0.0f;
    acc[i] = 0.0f;
  }
  float m, l;
  AttendPositions<kPerLane>(kv, tables + table_start[t], kvh * hd, hd, scale, r, qv, acc, &m, &l);
  float mx, total, f[kAttnWarps];
  CombineWarps<kPerLane>(m, l, acc, s_m, s_l, s_acc, &mx, &total, f);
  if (max_splits > 0) {
    StoreSplitAndMerge<kPerLane>(s_acc, f, mx, total, t, h, n_heads, hd, blockIdx.z, max_splits,
                                 (n_ctx + r.len - 1) / r.len, partial, out);
    return;
  }
  float* o = out + (static_cast<int64_t>(t) * n_heads + h) * hd;
  for (int e = threadIdx.x; e < hd; e += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) sum += s_acc[w][e] * f[w];
    o[e] = sum / total;
  }
}

}  // namespace

cudaError_t LaunchRopeKvWrite(const KvLayerView& kv, float* q, int n_heads, const float* k,
                              const float* v, int n_tokens, const int64_t* slot_offset,
                              int head_dim, const int32_t* positions, const float* freqs,
                              bool halves, cudaStream_t s, float freq_scale,
                              const float* freq_factors) {
  if (n_tokens <= 0) return cudaSuccess;
  if (head_dim <= 0 || head_dim % 2 != 0 || kv.kv_dim % head_dim != 0) return cudaErrorInvalidValue;
  const RopeArgs rope =
      MakeRopeArgs(q, n_heads, head_dim, positions, freqs, halves, freq_scale, freq_factors);
  PINFER_LAUNCH(KvWriteKernel, dim3(n_tokens, 3), kWriteThreads, 0, s)(kv, k, v, slot_offset, rope);
  return cudaGetLastError();
}

int AttentionMaxSplits(int n_heads, int sm_count) {
  const int want = (2 * std::max(sm_count, 1) + std::max(n_heads, 1) - 1) / std::max(n_heads, 1);
  return std::clamp(want, 1, kAttnMaxSplits);
}

size_t AttentionSplitFloats(int n_tokens, int n_heads, int head_dim, int max_splits) {
  const size_t pairs =
      static_cast<size_t>(std::max(n_tokens, 0)) * static_cast<size_t>(std::max(n_heads, 0));
  return pairs * (1 + static_cast<size_t>(std::max(max_splits, 1)) *
                          (static_cast<size_t>(std::max(head_dim, 0)) + 2));
}

cudaError_t LaunchAttention(const KvLayerView& kv, const float* q, int n_tokens, int n_heads,
                            int n_kv_heads, int head_dim, float scale, const int32_t* tables,
                            const int32_t* table_start, const int32_t* positions, float* out,
                            cudaStream_t s, float* split_scratch, int max_splits) {
  if (n_tokens <= 0) return cudaSuccess;
  if (head_dim > kMaxHeadDim || n_kv_heads <= 0 || n_heads % n_kv_heads != 0) {
    return cudaErrorInvalidValue;
  }
  if (split_scratch != nullptr && (max_splits < 1 || max_splits > kAttnMaxSplits)) {
    return cudaErrorInvalidValue;
  }
  const int splits = split_scratch != nullptr ? max_splits : 0;
  const dim3 grid(n_tokens, n_heads, std::max(splits, 1)), block(32 * kAttnWarps);
  if (head_dim <= 64) {
    PINFER_LAUNCH(AttentionKernel<2>, grid, block, 0, s)
    (kv, q, n_heads, n_kv_heads, head_dim, scale, tables, table_start, positions, out, splits,
     split_scratch);
  } else if (head_dim <= 128) {
    PINFER_LAUNCH(AttentionKernel<4>, grid, block, 0, s)
    (kv, q, n_heads, n_kv_heads, head_dim, scale, tables, table_start, positions, out, splits,
     split_scratch);
  } else {
    PINFER_LAUNCH(AttentionKernel<kPerLane>, grid, block, 0, s)
    (kv, q, n_heads, n_kv_heads, head_dim, scale, tables, table_start, positions, out, splits,
     split_scratch);
  }
  return cudaGetLastError();
}

}  // namespace pinfer::cuda
