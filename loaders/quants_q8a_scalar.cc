// The scalar reference of quants_q8a.h: the activation quantizer and the row dot products, in
// plain C++ with exactly the floats the header specifies (the other sets match it bit for bit).
#include <cmath>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"
#include "loaders/quants_q8a.h"

namespace pinfer::quants {
namespace {

// The stored scale: d rounded to the nearest half-precision value when d is a normal half
// (as llama.cpp stores its q8_0 / q8_1 activation scales), d itself outside that range.
float Q8AScale(float d) {
  return d >= kQ8AHalfMin && d <= kQ8AHalfMax ? Fp16ToFp32(Fp32ToFp16(d)) : d;
}

void Quantize(const float* x, void* out, int64_t n) {
  auto* b = static_cast<BlockQ8A*>(out);
  for (int64_t i = 0; i < n / kQK8A; ++i, x += kQK8A) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8A; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < kQK8A; ++j) {
      const int q = NearestInt(x[j] * id);
      b[i].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    b[i].d = Q8AScale(d);
    b[i].sum = sum;
  }
}

// A weight block's 32 codes (in value order), d_w, and the offset: kind 0 none, 1 the exact
// integer `shift` (8 or 16) times sum_a off i_b, 2 m_w * d_a times sum_a (m_w in `m`).
struct Codes {
  int q[32];
  float d;
  float m = 0.0f;
  int shift = 0;
  int kind;
};

void Nibbles(const uint8_t* qs, int* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = qs[j] & 0x0f;
    q[j + 16] = qs[j] >> 4;
  }
}

void FifthBits(const uint8_t* qh, int* q) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  for (int j = 0; j < 32; ++j) q[j] |= static_cast<int>((h >> j) & 1) << 4;
}

template <GgmlType T>
void Decode(const uint8_t* blk, Codes& c) {
  if constexpr (T == GgmlType::kQ4_0) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(blk);
    c.d = Fp16ToFp32(b->d), c.shift = 8, c.kind = 1;
    Nibbles(b->qs, c.q);
  } else if constexpr (T == GgmlType::kQ4_1) {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(blk);
    c.d = Fp16ToFp32(b->d), c.m = Fp16ToFp32(b->m), c.kind = 2;
    Nibbles(b->qs, c.q);
  } else if constexpr (T == GgmlType::kQ5_0) {
    const auto* b = reinterpret_cast<const BlockQ5_0*>(blk);
    c.d = Fp16ToFp32(b->d), c.shift = 16, c.kind = 1;
    Nibbles(b->qs, c.q);
    FifthBits(b->qh, c.q);
  } else if constexpr (T == GgmlType::kQ5_1) {
    const auto* b = reinterpret_cast<const BlockQ5_1*>(blk);
    c.d = Fp16ToFp32(b->d), c.m = Fp16ToFp32(b->m), c.kind = 2;
    Nibbles(b->qs, c.q);
    FifthBits(b->qh, c.q);
  } else {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(blk);
    c.d = Fp16ToFp32(b->d), c.kind = 0;
    for (int j = 0; j < 32; ++j) c.q[j] = b->qs[j];
  }
}

template <GgmlType T, typename Block>
void RowDot(const void* w_row, const void* acts, int64_t act_row_bytes, int n_tok, int64_t n,
            float* y, int64_t y_stride) {
  const auto* w = static_cast<const uint8_t*>(w_row);
  const int64_t nb = n / kQK8A;
  for (int t = 0; t < n_tok; ++t) {
    const auto* a =
        reinterpret_cast<const BlockQ8A*>(static_cast<const uint8_t*>(acts) + t * act_row_bytes);
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      Codes c;
      Decode<T>(w + b * static_cast<int64_t>(sizeof(Block)), c);
      int32_t i = 0;
      for (int j = 0; j < kQK8A; ++j) i += c.q[j] * a[b].qs[j];
      if (c.kind == 1) i -= c.shift * a[b].sum;
      acc = std::fma(c.d * a[b].d, static_cast<float>(i), acc);
      if (c.kind == 2) acc = std::fma(c.m * a[b].d, static_cast<float>(a[b].sum), acc);
    }
    y[t * y_stride] = acc;
  }
}

constexpr Q8AKernels kScalar = {"scalar",
                                Quantize,
                                RowDot<GgmlType::kQ4_0, BlockQ4_0>,
                                RowDot<GgmlType::kQ4_1, BlockQ4_1>,
                                RowDot<GgmlType::kQ5_0, BlockQ5_0>,
                                RowDot<GgmlType::kQ5_1, BlockQ5_1>,
                                RowDot<GgmlType::kQ8_0, BlockQ8_0>};

}  // namespace

const Q8AKernels& ScalarQ8AKernels() { return kScalar; }

const Q8AKernels& Q8AKernelsFor(KernelSet s) {
  const Q8AKernels* k = nullptr;
  switch (s) {
    case KernelSet::kScalar:
      break;
    case KernelSet::kAvxVnni:
      k = AvxVnniQ8AKernels();
      if (k == nullptr) k = Avx2Q8AKernels();  // the same values
      break;
    case KernelSet::kAvx512Vnni:
      // The AVX-VNNI rows where the CPU has AVX-VNNI (VEX), else the AVX2 ones (the same values).
      k = CpuRunsAvxVnni() ? AvxVnniQ8AKernels() : nullptr;
      if (k == nullptr) k = Avx2Q8AKernels();
      break;
    case KernelSet::kAvx2:
      k = Avx2Q8AKernels();
      break;
    case KernelSet::kNeon:
      k = NeonQ8AKernels();
      break;
  }
  return k != nullptr ? *k : kScalar;
}

RowDotFn Q8ARowDot(const Q8AKernels& k, GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_0:
      return k.q4_0;
    case GgmlType::kQ4_1:
      return k.q4_1;
    case GgmlType::kQ5_0:
      return k.q5_0;
    case GgmlType::kQ5_1:
      return k.q5_1;
    case GgmlType::kQ8_0:
      return k.q8_0;
    default:
      return nullptr;
  }
}

}  // namespace pinfer::quants
