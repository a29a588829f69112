// The K-quant super-block formats (Q4_K, Q5_K, Q6_K): scalar dequantization and reference
// quantizers following llama.cpp's scale searches (weighted min/scale refinement for Q4_K and
// Q5_K, a signed-scale sweep for Q6_K), including the 6-bit scale/min packing.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "loaders/fp16.h"
#include "loaders/quants_internal.h"

namespace pinfer::quants {
namespace {

constexpr int kSub = 32;  // Q4_K / Q5_K sub-block size
constexpr float kGroupMaxEps = 1e-15f;

// Fits x[i] ~ scale * L[i] - min_out with L in 0..nmax, minimising the weighted squared
// error: start from the plain min/max grid, then try nstep slightly different grid spacings
// and refit scale and offset by weighted least squares for each, keeping the best.
// Returns the scale; *min_out receives the (non-negative) offset subtracted at decode.
float FitScaleMin(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out,
                  float rmin, float rdelta, int nstep) {
  float lo = x[0], hi = x[0], sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::memset(L, 0, static_cast<size_t>(n));
    *min_out = -lo;
    return 0.0f;
  }
  float iscale = nmax / (hi - lo);
  float scale = 1.0f / iscale;
  float best_err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(NearestInt(iscale * (x[i] - lo)), 0, nmax);
    L[i] = static_cast<uint8_t>(l);
    const float diff = scale * l + lo - x[i];
    best_err += w[i] * diff * diff;
  }
  uint8_t trial[kQK_K];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(NearestInt(iscale * (x[i] - lo)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {  // the offset may only lower values: refit the scale alone
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * trial[i] + this_min - x[i];
      err += w[i] * diff * diff;
    }
    if (err < best_err) {
      std::memcpy(L, trial, static_cast<size_t>(n));
      best_err = err;
      scale = this_scale;
      lo = this_min;
    }
  }
  *min_out = -lo;
  return scale;
}

// Fits x[i] ~ scale * (L[i] - nmax) with L in 0..2*nmax-1, weights x^2, sweeping the grid
// spacing around nmax/|max| and keeping the one with the best weighted least-squares fit.
float FitSignedScale(int n, int nmax, const float* x, uint8_t* L) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  auto sums = [&](float iscale, float* sumlx_out, float* suml2_out) {
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    *sumlx_out = sumlx;
    *suml2_out = suml2;
  };
  auto assign = [&](float iscale) {
    for (int i = 0; i < n; ++i) {
      L[i] = static_cast<uint8_t>(nmax + std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
    }
  };
  float iscale = -nmax / max;
  float sumlx, suml2;
  sums(iscale, &sumlx, &suml2);
  assign(iscale);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sums(iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      assign(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Packs eight 6-bit scales and mins into the 12-byte layout UnpackKScaleMin reads.
void PackKScaleMin(const int* sc, const int* m, uint8_t* s) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = static_cast<uint8_t>(sc[j]);
      s[j + 4] = static_cast<uint8_t>(m[j]);
    } else {
      s[j + 4] = static_cast<uint8_t>((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
      s[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      s[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
    }
  }
}

// Shared by Q4_K and Q5_K: per-sub-block fits, quantized 6-bit scales/mins, then codes
// recomputed against the stored (rounded) scales. Writes d, dmin, scales and L[256].
void QuantKScaleMin(const float* x, int nmax, float rmin, int nstep, uint16_t* d_out,
                    uint16_t* dmin_out, uint8_t* packed, uint8_t* L) {
  float scales[8], mins[8], w[kSub];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + kSub * j;
    float sum_x2 = 0;
    for (int l = 0; l < kSub; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / kSub);
    for (int l = 0; l < kSub; ++l) w[l] = av_x + std::fabs(xs[l]);
    scales[j] = FitScaleMin(kSub, nmax, xs, w, L + kSub * j, &mins[j], rmin, 0.1f, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  int ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = std::min(63, NearestInt(inv_scale * scales[j]));
    lm[j] = std::min(63, NearestInt(inv_min * mins[j]));
  }
  std::memset(packed, 0, kKScaleBytes);
  PackKScaleMin(ls, lm, packed);
  *d_out = Fp32ToFp16(max_scale / 63.0f);
  *dmin_out = Fp32ToFp16(max_min / 63.0f);
  const float d = Fp16ToFp32(*d_out), dmin = Fp16ToFp32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    UnpackKScaleMin(packed, j, &sc, &m);
    const float ds = d * sc;
    if (ds == 0.0f) continue;
    const float dm = dmin * m;
    for (int l = 0; l < kSub; ++l) {
      L[kSub * j + l] =
          static_cast<uint8_t>(std::clamp(NearestInt((x[kSub * j + l] + dm) / ds), 0, nmax));
    }
  }
}

}  // namespace

void DequantQ4_K(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(b[i].d), dmin = Fp16ToFp32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int c = 0; c < 4; ++c, q += 32, y += 64) {  // 64 values: sub-blocks 2c and 2c+1
      int sc0, m0, sc1, m1;
      UnpackKScaleMin(b[i].scales, 2 * c, &sc0, &m0);
      UnpackKScaleMin(b[i].scales, 2 * c + 1, &sc1, &m1);
      const float d0 = d * sc0, o0 = dmin * m0, d1 = d * sc1, o1 = dmin * m1;
      for (int l = 0; l < 32; ++l) {
        y[l] = d0 * (q[l] & 0x0f) - o0;
        y[l + 32] = d1 * (q[l] >> 4) - o1;
      }
    }
  }
}

void DequantQ5_K(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(b[i].d), dmin = Fp16ToFp32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int c = 0; c < 4; ++c, q += 32, y += 64) {  // high bits: qh bit 2c, then 2c+1
      int sc0, m0, sc1, m1;
      UnpackKScaleMin(b[i].scales, 2 * c, &sc0, &m0);
      UnpackKScaleMin(b[i].scales, 2 * c + 1, &sc1, &m1);
      const float d0 = d * sc0, o0 = dmin * m0, d1 = d * sc1, o1 = dmin * m1;
      for (int l = 0; l < 32; ++l) {
        const int h0 = (b[i].qh[l] >> (2 * c)) & 1, h1 = (b[i].qh[l] >> (2 * c + 1)) & 1;
        y[l] = d0 * ((q[l] & 0x0f) | (h0 << 4)) - o0;
        y[l + 32] = d1 * ((q[l] >> 4) | (h1 << 4)) - o1;
      }
    }
  }
}

void DequantQ6_K(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int h = 0; h < 2; ++h, y += 128) {  // each half: 64 ql bytes, 32 qh bytes, 8 scales
      const uint8_t* ql = b[i].ql + 64 * h;
      const uint8_t* qh = b[i].qh + 32 * h;
      const int8_t* sc = b[i].scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int s = l / 16;
        const int q0 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[s] * q0;
        y[l + 32] = d * sc[s + 2] * q1;
        y[l + 64] = d * sc[s + 4] * q2;
        y[l + 96] = d * sc[s + 6] * q3;
      }
    }
  }
}

void QuantQ4_K(const float* x, BlockQ4_K* b, int64_t nb) {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    QuantKScaleMin(x, 15, -1.0f, 20, &b[i].d, &b[i].dmin, b[i].scales, L);
    uint8_t* q = b[i].qs;
    for (int c = 0; c < 4; ++c, q += 32) {
      for (int l = 0; l < 32; ++l)
        q[l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
  }
}

void QuantQ5_K(const float* x, BlockQ5_K* b, int64_t nb) {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    QuantKScaleMin(x, 31, -0.5f, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    uint8_t* q = b[i].qs;
    for (int c = 0; c < 4; ++c, q += 32) {
      for (int l = 0; l < 32; ++l) {
        const int v0 = L[64 * c + l], v1 = L[64 * c + 32 + l];
        q[l] = static_cast<uint8_t>((v0 & 0x0f) | ((v1 & 0x0f) << 4));
        b[i].qh[l] |= static_cast<uint8_t>(((v0 >> 4) << (2 * c)) | ((v1 >> 4) << (2 * c + 1)));
      }
    }
  }
}

void QuantQ6_K(const float* x, BlockQ6_K* b, int64_t nb) {
  uint8_t L[kQK_K];
  float scales[16];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0, max_abs_scale = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = FitSignedScale(16, 32, x + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&b[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.0f / max_scale;
    b[i].d = Fp32ToFp16(1.0f / iscale);
    for (int j = 0; j < 16; ++j) {
      b[i].scales[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[j])));
    }
    const float d = Fp16ToFp32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      const float ds = d * b[i].scales[j];
      if (ds == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        const int q = std::clamp(NearestInt(x[16 * j + l] / ds), -32, 31);
        L[16 * j + l] = static_cast<uint8_t>(q + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = b[i].ql + 64 * h;
      uint8_t* qh = b[i].qh + 32 * h;
      const uint8_t* v = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q0 = v[l], q1 = v[l + 32], q2 = v[l + 64], q3 = v[l + 96];
        ql[l] = static_cast<uint8_t>((q0 & 0x0f) | ((q2 & 0x0f) << 4));
        ql[l + 32] = static_cast<uint8_t>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
        qh[l] = static_cast<uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) |
                                     ((q3 >> 4) << 6));
      }
    }
  }
}

}  // namespace pinfer::quants
