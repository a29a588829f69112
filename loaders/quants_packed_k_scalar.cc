// The portable reference of quants_packed_k.h: each packed super-block is decoded row by row
// from the packed layout (not by unpacking to the file's blocks, so the tests check the layout
// the vector kernels read) and every (row, token) pair takes quants_q8k.h's per-block steps:
// exact integer sums, then std::fma as the contract fixes.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"
#include "loaders/quants_packed_k.h"
#include "loaders/quants_q8k.h"

namespace pinfer::quants {
namespace {

// One row's super-block as unsigned codes and integer scales (and mins for Q4_K / Q5_K).
struct RowBlock {
  uint8_t q[kQK_K];
  int sc[16];  // Q4_K / Q5_K: 8 sub-blocks of 32; Q6_K: 16 of 16
  int m[8];
  float d, dmin;
};

template <typename Packed>
void DecodeScalesQ45(const Packed& p, int r, RowBlock* o) {
  uint8_t s[kKScaleBytes];
  for (int w = 0; w < 3; ++w) std::memcpy(s + 4 * w, p.scales[w][r], 4);
  for (int j = 0; j < 8; ++j) UnpackKScaleMin(s, j, &o->sc[j], &o->m[j]);
  o->d = Fp16ToFp32(p.d[r]);
  o->dmin = Fp16ToFp32(p.dmin[r]);
}

void Decode(const PackedQ4_K& p, int r, RowBlock* o) {
  for (int c = 0; c < 4; ++c) {
    for (int k = 0; k < 8; ++k) {
      for (int i = 0; i < 4; ++i) {
        const uint8_t b = p.qs[c][k][r][i];
        o->q[64 * c + 4 * k + i] = b & 0x0f;
        o->q[64 * c + 32 + 4 * k + i] = b >> 4;
      }
    }
  }
  DecodeScalesQ45(p, r, o);
}

void Decode(const PackedQ5_K& p, int r, RowBlock* o) {
  for (int c = 0; c < 4; ++c) {
    for (int k = 0; k < 8; ++k) {
      for (int i = 0; i < 4; ++i) {
        const uint8_t b = p.qs[c][k][r][i], h = p.qh[k][r][i];
        o->q[64 * c + 4 * k + i] = static_cast<uint8_t>((b & 0x0f) | (((h >> (2 * c)) & 1) << 4));
        o->q[64 * c + 32 + 4 * k + i] =
            static_cast<uint8_t>((b >> 4) | (((h >> (2 * c + 1)) & 1) << 4));
      }
    }
  }
  DecodeScalesQ45(p, r, o);
}

void Decode(const PackedQ6_K& p, int r, RowBlock* o) {
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 8; ++k) {
      for (int i = 0; i < 4; ++i) {
        const int hi = p.qh[h][k][r][i];
        for (int c = 0; c < 2; ++c) {
          const uint8_t b = p.ql[h][c][k][r][i];
          const int lo_v = 128 * h + 32 * c + 4 * k + i, hi_v = lo_v + 64;  // quarters c, c + 2
          o->q[lo_v] = static_cast<uint8_t>((b & 0x0f) | (((hi >> (2 * c)) & 3) << 4));
          o->q[hi_v] = static_cast<uint8_t>((b >> 4) | (((hi >> (2 * c + 4)) & 3) << 4));
        }
      }
    }
  }
  for (int j = 0; j < 16; ++j) o->sc[j] = p.scales[j][r];
  o->d = Fp16ToFp32(p.d[r]);
  o->dmin = 0.0f;
}

template <int kSub>
int32_t ScaledSum(const RowBlock& w, const int8_t* a) {
  int32_t sumi = 0;
  for (int j = 0; j < kQK_K / kSub; ++j) {
    int32_t s = 0;
    for (int l = 0; l < kSub; ++l) s += w.q[kSub * j + l] * a[kSub * j + l];
    sumi += w.sc[j] * s;
  }
  return sumi;
}

// One (row, token) step over one super-block, as quants_q8k.h fixes it.
template <bool kQ6>
float Step(const RowBlock& w, const BlockQ8_K& a, float acc) {
  if constexpr (kQ6) {
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

template <typename Packed>
void PackedDot(const void* w, int64_t n_rows, const void* acts, int64_t act_row_bytes, int n_tok,
               int64_t n, float* y, int64_t y_row_stride) {
  constexpr bool kQ6 = std::is_same_v<Packed, PackedQ6_K>;
  const auto* wp = static_cast<const uint8_t*>(w);
  const auto* a = static_cast<const uint8_t*>(acts);
  const int64_t nb = n / kQK_K;
  for (int t = 0; t < n_tok; ++t) {
    for (int64_t r = 0; r < n_rows; ++r) y[t * y_row_stride + r] = 0.0f;
  }
  RowBlock dec;
  Packed p;
  BlockQ8_K ab;
  for (int64_t g = 0; g * kPackKRows < n_rows; ++g) {
    const int rows = n_rows - g * kPackKRows < kPackKRows
                         ? static_cast<int>(n_rows - g * kPackKRows)
                         : kPackKRows;
    for (int64_t i = 0; i < nb; ++i) {
      std::memcpy(&p, wp + (g * nb + i) * static_cast<int64_t>(sizeof(Packed)), sizeof(p));
      for (int r = 0; r < rows; ++r) {
        Decode(p, r, &dec);
        for (int t = 0; t < n_tok; ++t) {
          std::memcpy(&ab, a + t * act_row_bytes + i * static_cast<int64_t>(sizeof(BlockQ8_K)),
                      sizeof(ab));
          float& out = y[t * y_row_stride + g * kPackKRows + r];
          out = Step<kQ6>(dec, ab, out);
        }
      }
    }
  }
}

}  // namespace

const PackedKQuantKernels& ScalarPackedKQuantKernels() {
  static constexpr PackedKQuantKernels kSet{"scalar", PackedDot<PackedQ4_K>, PackedDot<PackedQ5_K>,
                                            PackedDot<PackedQ6_K>};
  return kSet;
}

}  // namespace pinfer::quants
