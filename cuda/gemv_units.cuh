// The per-lane work of the decode GEMV (quant_kernels.cu), in functions that also compile for
// the host, so that tests can run a warp's lanes one after another on the CPU and check the
// index math of every load path without a GPU (cuda_kernels_test: GemvLanesOnHost).
//
// One warp per weight row. Block types are read a "unit" at a time per lane: whole blocks
// (legacy types) or a 64-value slice of a super-block (K types), loaded into registers with
// the widest loads the layout allows (16-byte loads for Q4_K/Q5_K; 4-byte loads for Q4_1,
// Q5_1, and for pairs of 18/22/34-byte blocks when a row holds an even number of them; 2-byte
// loads otherwise, e.g. Q6_K's 210-byte blocks). Each unit is dequantized from registers, 8
// values at a time, and multiplied against every one of the step's token rows while it is
// there, into float32 sums per token (the kernel then adds the lanes' sums with shuffles).
#pragma once

#include <cuda_fp16.h>
#include <vector_types.h>

#include <cstdint>

#include "cuda/kernels.h"

#if defined(__CUDA_ARCH__)  // the device pass (the host compiler knows no unroll pragma)
#define PINFER_UNROLL _Pragma("unroll")
#else
#define PINFER_UNROLL
#endif

namespace pinfer::cuda::gemv {

// Read-only loads: through the read-only cache on the device, plain loads on the host.
template <typename T>
__host__ __device__ __forceinline__ T Ld(const T* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

__host__ __device__ __forceinline__ float HalfOf(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xffffu)));
}

// Byte o / the 16-bit value at even byte o of a little-endian word array; o is a constant once
// the loops around are unrolled, so these are shifts of registers, not memory accesses.
template <int N>
__host__ __device__ __forceinline__ uint32_t ByteOf(const uint32_t (&w)[N], int o) {
  return (w[o >> 2] >> (8 * (o & 3))) & 0xffu;
}
template <int N>
__host__ __device__ __forceinline__ uint32_t U16Of(const uint32_t (&w)[N], int o) {
  return (w[o >> 2] >> (8 * (o & 2))) & 0xffffu;
}

// acc[t] += v . x[t][col, col + 8) for t < n (x rows are cols floats; col % 8 == 0).
template <int kMaxT>
__host__ __device__ __forceinline__ void Fma8(float (&acc)[kMaxT], const float (&v)[8],
                                              const float* __restrict__ x, int64_t cols, int n,
                                              int64_t col) {
  PINFER_UNROLL
  for (int t = 0; t < kMaxT; ++t) {
    if (t < n) {
      const float4* xp = reinterpret_cast<const float4*>(x + t * cols + col);
      const float4 a = Ld(xp), b = Ld(xp + 1);
      acc[t] += v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * b.x + v[5] * b.y +
                v[6] * b.z + v[7] * b.w;
    }
  }
}

constexpr int LegacyBlockBytes(int type) {
  return type == kWQ4_0   ? 18
         : type == kWQ4_1 ? 20
         : type == kWQ5_0 ? 22
         : type == kWQ5_1 ? 24
         : type == kWQ8_0 ? 34
                          : 0;
}

// kBytes bytes at p (2-byte aligned; 4-byte aligned when kWords) -> w, little-endian.
template <int kBytes, bool kWords>
__host__ __device__ __forceinline__ void LoadUnit(const uint8_t* p,
                                                  uint32_t (&w)[(kBytes + 3) / 4]) {
  if constexpr (kWords) {
    static_assert(kBytes % 4 == 0, "word loads need a whole number of words");
    const unsigned int* q = reinterpret_cast<const unsigned int*>(p);
    PINFER_UNROLL
    for (int i = 0; i < kBytes / 4; ++i) w[i] = Ld(q + i);
  } else {
    static_assert(kBytes % 2 == 0, "GGUF blocks are a whole number of 16-bit words");
    const unsigned short* q = reinterpret_cast<const unsigned short*>(p);
    PINFER_UNROLL
    for (int i = 0; i < (kBytes + 3) / 4; ++i) {
      const uint32_t lo = Ld(q + 2 * i);
      const uint32_t hi = 2 * i + 1 < kBytes / 2 ? Ld(q + 2 * i + 1) : 0u;
      w[i] = lo | (hi << 16);
    }
  }
}

// Values [j0, j0 + 8) of the legacy block starting at byte `at` of w: the formulas of
// loaders/quants_legacy.cc (and Dequant8).
template <int kType, int N>
__host__ __device__ __forceinline__ void LegacyDequant8(const uint32_t (&w)[N], int at, int j0,
                                                        float (&v)[8]) {
  if constexpr (kType == kWQ4_0 || kType == kWQ4_1) {
    constexpr bool kMin = kType == kWQ4_1;
    const float d = HalfOf(U16Of(w, at));
    const float m = kMin ? HalfOf(U16Of(w, at + 2)) : 0.0f;
    const int qs = at + (kMin ? 4 : 2);
    PINFER_UNROLL
    for (int k = 0; k < 8; ++k) {
      const int j = j0 + k;
      const int q = j < 16 ? static_cast<int>(ByteOf(w, qs + j) & 0xF)
                           : static_cast<int>(ByteOf(w, qs + j - 16) >> 4);
      v[k] = kMin ? static_cast<float>(q) * d + m : static_cast<float>(q - 8) * d;
    }
  } else if constexpr (kType == kWQ5_0 || kType == kWQ5_1) {
    constexpr bool kMin = kType == kWQ5_1;
    const float d = HalfOf(U16Of(w, at));
    const float m = kMin ? HalfOf(U16Of(w, at + 2)) : 0.0f;
    const int qh = at + (kMin ? 4 : 2), qs = qh + 4;
    const uint32_t h = ByteOf(w, qh) | (ByteOf(w, qh + 1) << 8) | (ByteOf(w, qh + 2) << 16) |
                       (ByteOf(w, qh + 3) << 24);
    PINFER_UNROLL
    for (int k = 0; k < 8; ++k) {
      const int j = j0 + k;
      const int lo = j < 16 ? static_cast<int>(ByteOf(w, qs + j) & 0xF)
                            : static_cast<int>(ByteOf(w, qs + j - 16) >> 4);
      const int q = lo | static_cast<int>(((h >> j) & 1u) << 4);
      v[k] = kMin ? static_cast<float>(q) * d + m : static_cast<float>(q - 16) * d;
    }
  } else {
    static_assert(kType == kWQ8_0, "a legacy block type");
    const float d = HalfOf(U16Of(w, at));
    PINFER_UNROLL
    for (int k = 0; k < 8; ++k) {
      const int8_t q = static_cast<int8_t>(ByteOf(w, at + 2 + j0 + k));
      v[k] = static_cast<float>(q) * d;
    }
  }
}

// Scale and min of Q4_K/Q5_K sub-block j (0..7) from the scale words s0 = bytes 0..3,
// s1 = 4..7, s2 = 8..11 (get_scale_min_k4; j may differ between lanes).
__host__ __device__ __forceinline__ void ScaleMinWords(int j, uint32_t s0, uint32_t s1, uint32_t s2,
                                                       float* sc, float* m) {
  if (j < 4) {
    *sc = static_cast<float>((s0 >> (8 * j)) & 63u);
    *m = static_cast<float>((s1 >> (8 * j)) & 63u);
  } else {
    const int k = 8 * (j - 4);
    const uint32_t hi = (s2 >> k) & 0xffu, a = (s0 >> k) & 0xffu, b = (s1 >> k) & 0xffu;
    *sc = static_cast<float>((hi & 0xFu) | ((a >> 6) << 4));
    *m = static_cast<float>((hi >> 4) | ((b >> 6) << 4));
  }
}

__host__ __device__ __forceinline__ void Words(const uint4& a, const uint4& b, uint32_t (&w)[8]) {
  w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
}

// 16 bytes at a 2-byte aligned p -> w.
__host__ __device__ __forceinline__ void Load16Bytes(const unsigned short* p, uint32_t (&w)[4]) {
  PINFER_UNROLL
  for (int i = 0; i < 4; ++i) {
    w[i] = static_cast<uint32_t>(Ld(p + 2 * i)) | (static_cast<uint32_t>(Ld(p + 2 * i + 1)) << 16);
  }
}

// Lane `lane` of `lanes` adds its units of one row of a legacy block type (32 values per
// block; a unit is kUnitBlocks consecutive blocks) into acc[t], t < n.
template <int kType, int kUnitBlocks, bool kWords, int kMaxT>
__host__ __device__ __forceinline__ void LegacyLane(const uint8_t* row, const float* x,
                                                    int64_t cols, int n, int lane, int lanes,
                                                    float (&acc)[kMaxT]) {
  constexpr int kBytes = LegacyBlockBytes(kType);
  constexpr int kUnitBytes = kBytes * kUnitBlocks;
  const int64_t units = cols / (32 * kUnitBlocks);
  // Two units in flight per lane at batch 1; at 16 tokens the registers go to the sums.
#if defined(__CUDA_ARCH__)
#pragma unroll(kMaxT == 1 ? 2 : 1)
#endif
  for (int64_t u = lane; u < units; u += lanes) {
    uint32_t q[(kUnitBytes + 3) / 4];
    LoadUnit<kUnitBytes, kWords>(row + u * kUnitBytes, q);
    PINFER_UNROLL
    for (int b = 0; b < kUnitBlocks; ++b) {
      PINFER_UNROLL
      for (int g = 0; g < 4; ++g) {
        float v[8];
        LegacyDequant8<kType>(q, b * kBytes, 8 * g, v);
        Fma8(acc, v, x, cols, n, (u * kUnitBlocks + b) * 32 + 8 * g);
      }
    }
  }
}

// Lane `lane` of `lanes` adds its units of one row of a K type into acc[t], t < n. K types
// have 256 values per super-block, read as four 64-value units:
//   Q4_K / Q5_K unit c: sub-blocks 2c and 2c+1 (the low and high nibbles of qs[32c, 32c+32));
//   Q6_K unit (h, p): values 128h + 16p + {0, 32, 64, 96} + [0, 16).
template <int kType, int kMaxT>
__host__ __device__ __forceinline__ void KLane(const uint8_t* row, const float* x, int64_t cols,
                                               int n, int lane, int lanes, float (&acc)[kMaxT]) {
  constexpr int kBlockBytes = kType == kWQ4_K ? 144 : kType == kWQ5_K ? 176 : 210;
  const int64_t units = cols / 256 * 4;
#if defined(__CUDA_ARCH__)
#pragma unroll(kMaxT == 1 ? 2 : 1)
#endif
  for (int64_t u = lane; u < units; u += lanes) {
    const int64_t sb = u >> 2;
    const int c = static_cast<int>(u & 3);
    const uint8_t* b = row + sb * kBlockBytes;
    const int64_t col0 = sb * 256;
    if constexpr (kType == kWQ4_K || kType == kWQ5_K) {
      constexpr bool kFive = kType == kWQ5_K;
      const uint4* b16 = reinterpret_cast<const uint4*>(b);
      const uint4 head = Ld(b16);  // d, dmin, 12 scale bytes
      uint32_t qs[8], qh[8];
      Words(Ld(b16 + (kFive ? 3 : 1) + 2 * c), Ld(b16 + (kFive ? 4 : 2) + 2 * c), qs);
      if constexpr (kFive) Words(Ld(b16 + 1), Ld(b16 + 2), qh);
      const float d = HalfOf(head.x), dmin = HalfOf(head.x >> 16);
      float sc0, m0, sc1, m1;
      ScaleMinWords(2 * c, head.y, head.z, head.w, &sc0, &m0);
      ScaleMinWords(2 * c + 1, head.y, head.z, head.w, &sc1, &m1);
      const float d0 = d * sc0, o0 = dmin * m0, d1 = d * sc1, o1 = dmin * m1;
      PINFER_UNROLL
      for (int half = 0; half < 2; ++half) {
        const float dd = half ? d1 : d0, oo = half ? o1 : o0;
        const int hbit = 2 * c + half;
        PINFER_UNROLL
        for (int g = 0; g < 4; ++g) {
          float v[8];
          PINFER_UNROLL
          for (int k = 0; k < 8; ++k) {
            const int l = 8 * g + k;
            int q = static_cast<int>(half ? ByteOf(qs, l) >> 4 : ByteOf(qs, l) & 0xF);
            if constexpr (kFive) q |= static_cast<int>(((ByteOf(qh, l) >> hbit) & 1u) << 4);
            v[k] = dd * static_cast<float>(q) - oo;
          }
          Fma8(acc, v, x, cols, n, col0 + 64 * c + 32 * half + 8 * g);
        }
      }
    } else {
      static_assert(kType == kWQ6_K, "a K type");
      const int h = c >> 1, p = c & 1;
      const unsigned short* b16 = reinterpret_cast<const unsigned short*>(b);
      uint32_t ql0[4], ql1[4], qh[4];
      Load16Bytes(b16 + 32 * h + 8 * p, ql0);       // ql[64h + 16p + i]
      Load16Bytes(b16 + 32 * h + 16 + 8 * p, ql1);  // ql[64h + 32 + 16p + i]
      Load16Bytes(b16 + 64 + 16 * h + 8 * p, qh);   // qh[32h + 16p + i]
      const float d = HalfOf(Ld(b16 + 104));
      float ds[4];  // d x scales[8h + p + 2k]
      PINFER_UNROLL
      for (int k = 0; k < 4; ++k) {
        const uint32_t pair = Ld(b16 + 96 + 4 * h + k);  // scales[8h + 2k], [8h + 2k + 1]
        ds[k] = d * static_cast<float>(static_cast<int8_t>((pair >> (8 * p)) & 0xffu));
      }
      PINFER_UNROLL
      for (int k = 0; k < 4; ++k) {  // values 128h + 16p + 32k + i
        const uint32_t(&ql)[4] = (k & 1) ? ql1 : ql0;
        PINFER_UNROLL
        for (int g = 0; g < 2; ++g) {
          float v[8];
          PINFER_UNROLL
          for (int e = 0; e < 8; ++e) {
            const int i = 8 * g + e;
            const uint32_t lo = k < 2 ? ByteOf(ql, i) & 0xFu : ByteOf(ql, i) >> 4;
            const int q = static_cast<int>(lo | (((ByteOf(qh, i) >> (2 * k)) & 3u) << 4)) - 32;
            v[e] = ds[k] * static_cast<float>(q);
          }
          Fma8(acc, v, x, cols, n, col0 + 128 * h + 16 * p + 32 * k + 8 * g);
        }
      }
    }
  }
}

}  // namespace pinfer::cuda::gemv
