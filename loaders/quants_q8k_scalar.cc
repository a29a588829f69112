// The portable reference of quants_q8k.h: the Q8_K activation quantizer and the Q4_K / Q5_K /
// Q6_K row dot products, with plain integer loops for the exact per-block sums and std::fma
// for the float steps the contract fixes. Every other set is tested against these.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"
#include "loaders/quants_q8k.h"

namespace pinfer::quants {
namespace {

// One weight block as unsigned codes and integer scales (and mins for Q4_K / Q5_K).
struct DecodedBlock {
  uint8_t q[kQK_K];
  int sc[16];  // Q4_K / Q5_K: 8 sub-blocks of 32; Q6_K: 16 of 16
  int m[8];
  float d, dmin;
};

void Decode(const BlockQ4_K& b, DecodedBlock* o) {
  for (int c = 0; c < 4; ++c) {  // chunk c: low nibbles sub-block 2c, high nibbles 2c+1
    for (int l = 0; l < 32; ++l) {
      o->q[64 * c + l] = b.qs[32 * c + l] & 0x0f;
      o->q[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
    }
  }
  for (int j = 0; j < 8; ++j) UnpackKScaleMin(b.scales, j, &o->sc[j], &o->m[j]);
  o->d = Fp16ToFp32(b.d);
  o->dmin = Fp16ToFp32(b.dmin);
}

void Decode(const BlockQ5_K& b, DecodedBlock* o) {
  for (int c = 0; c < 4; ++c) {  // the fifth bits: qh bit 2c, then 2c+1
    for (int l = 0; l < 32; ++l) {
      const int h0 = (b.qh[l] >> (2 * c)) & 1, h1 = (b.qh[l] >> (2 * c + 1)) & 1;
      o->q[64 * c + l] = static_cast<uint8_t>((b.qs[32 * c + l] & 0x0f) | (h0 << 4));
      o->q[64 * c + 32 + l] = static_cast<uint8_t>((b.qs[32 * c + l] >> 4) | (h1 << 4));
    }
  }
  for (int j = 0; j < 8; ++j) UnpackKScaleMin(b.scales, j, &o->sc[j], &o->m[j]);
  o->d = Fp16ToFp32(b.d);
  o->dmin = Fp16ToFp32(b.dmin);
}

void Decode(const BlockQ6_K& b, DecodedBlock* o) {
  for (int h = 0; h < 2; ++h) {  // each half: 64 ql bytes, 32 qh bytes
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    uint8_t* q = o->q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      q[l] = static_cast<uint8_t>((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4));
      q[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4));
      q[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      q[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
  for (int j = 0; j < 16; ++j) o->sc[j] = b.scales[j];
  o->d = Fp16ToFp32(b.d);
  o->dmin = 0.0f;
}

// sum_j sc[j] * sum_{kSub values of sub-block j} q * a.
template <int kSub>
int32_t ScaledSum(const DecodedBlock& w, const int8_t* a) {
  int32_t sumi = 0;
  for (int j = 0; j < kQK_K / kSub; ++j) {
    int32_t s = 0;
    for (int l = 0; l < kSub; ++l) s += w.q[kSub * j + l] * a[kSub * j + l];
    sumi += w.sc[j] * s;
  }
  return sumi;
}

// One token's step over one block, as quants_q8k.h fixes it.
template <typename Block>
float Step(const DecodedBlock& w, const BlockQ8_K& a, float acc) {
  if constexpr (std::is_same_v<Block, BlockQ6_K>) {
    int32_t offset = 0;
    for (int j = 0; j < 16; ++j) offset += w.sc[j] * a.bsums[j];
    const int32_t sumi = ScaledSum<16>(w, a.qs) - 32 * offset;
    return std::fma(w.d * a.d, static_cast<float>(sumi), acc);
  } else {
    int32_t summ = 0;
    for (int j = 0; j < 8; ++j) summ += w.m[j] * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
    const int32_t sumi = ScaledSum<32>(w, a.qs);
    acc = std::fma(w.d * a.d, static_cast<float>(sumi), acc);
    return std::fma(-(w.dmin * a.d), static_cast<float>(summ), acc);
  }
}

// Block by block, every token: y[t] accumulates in place.
template <typename Block>
void RowDot(const void* w_row, const void* acts, int64_t act_row_bytes, int n_tok, int64_t n,
            float* y, int64_t y_stride) {
  const auto* w = static_cast<const Block*>(w_row);
  const auto* a = static_cast<const uint8_t*>(acts);
  for (int t = 0; t < n_tok; ++t) y[t * y_stride] = 0.0f;
  DecodedBlock dec;
  BlockQ8_K ab;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(w[i], &dec);
    for (int t = 0; t < n_tok; ++t) {
      std::memcpy(&ab, a + t * act_row_bytes + i * static_cast<int64_t>(sizeof(BlockQ8_K)),
                  sizeof(ab));
      y[t * y_stride] = Step<Block>(dec, ab, y[t * y_stride]);
    }
  }
}

void QuantizeQ8K(const float* x, void* out, int64_t n) {
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K, o += sizeof(BlockQ8_K)) {
    BlockQ8_K b;
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    const float iscale = amax == 0.0f ? 0.0f : -127.0f / max;
    if (amax == 0.0f || std::isinf(iscale)) {  // zero, or too small for a finite 127 / max
      std::memset(&b, 0, sizeof(b));
    } else {
      for (int j = 0; j < kQK_K; ++j) {
        const int v = NearestInt(iscale * x[j]);
        b.qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
      }
      for (int k = 0; k < kQK_K / 16; ++k) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += b.qs[16 * k + l];
        b.bsums[k] = static_cast<int16_t>(sum);
      }
      b.d = 1.0f / iscale;
    }
    std::memcpy(o, &b, sizeof(b));
  }
}

}  // namespace

const KQuantKernels& ScalarKQuantKernels() {
  static constexpr KQuantKernels kSet{"scalar", QuantizeQ8K, RowDot<BlockQ4_K>, RowDot<BlockQ5_K>,
                                      RowDot<BlockQ6_K>};
  return kSet;
}

const KQuantKernels& KQuantKernelsFor(KernelSet s) {
  const KQuantKernels* k = nullptr;
  if (UsesAvx2Kernels(s)) k = Avx2KQuantKernels();
  if (s == KernelSet::kNeon) k = NeonKQuantKernels();
  return k != nullptr ? *k : ScalarKQuantKernels();
}

}  // namespace pinfer::quants
