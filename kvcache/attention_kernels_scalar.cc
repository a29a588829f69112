// The portable attention kernels: each row's head slice decoded by KvDecodeRange (the same
// values every set reads), dot products and value sums in index order, std::exp.
#include <cmath>

#include "kvcache/attention_kernels.h"
#include "kvcache/kv_codec.h"

namespace pinfer::attention {
namespace {

void Score(const HeadRows& k, const float* q, int n_q, float scale, float* scores, float* buf) {
  for (int j = 0; j < k.n; ++j) {
    KvDecodeRange(k.dtype, k.rows[j], k.n_row, k.begin, k.hd, buf);
    for (int h = 0; h < n_q; ++h) {
      const float* qh = q + static_cast<size_t>(h) * k.hd;
      float dot = 0;
      for (int i = 0; i < k.hd; ++i) dot += qh[i] * buf[i];
      scores[h * kTile + j] = dot * scale;
    }
  }
}

float ExpSum(float* s, int n, float m) {
  float sum = 0;
  for (int j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - m);
    sum += s[j];
  }
  return sum;
}

void Accumulate(const HeadRows& v, const float* p, int n_q, float* acc, float* buf) {
  for (int j = 0; j < v.n; ++j) {
    KvDecodeRange(v.dtype, v.rows[j], v.n_row, v.begin, v.hd, buf);
    for (int h = 0; h < n_q; ++h) {
      const float w = p[h * kTile + j];
      float* a = acc + static_cast<size_t>(h) * v.hd;
      for (int i = 0; i < v.hd; ++i) a[i] = std::fma(w, buf[i], a[i]);
    }
  }
}

constexpr AttentionKernels kScalar = {"scalar", Score, ExpSum, Accumulate};

}  // namespace

const AttentionKernels& ScalarAttentionKernels() { return kScalar; }

}  // namespace pinfer::attention
