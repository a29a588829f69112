// RoPE on the device, as ApplyRope (engine/ops.cc) computes it: the same frequencies (from
// the host, RopeFrequencies), the same order of operations (pos x freq, / factor, x scale).
// Used by the KV write (kv_kernels.cu), which rotates q in place and K on its way into the
// cache.
#pragma once

#include <cstdint>

namespace pinfer::cuda {

// What to rotate and how.
struct RopeArgs {
  float* q = nullptr;  // [n_tokens x n_heads x head_dim], rotated in place
  int n_heads = 0, head_dim = 0;
  const int32_t* positions = nullptr;
  const float* freqs = nullptr;    // [head_dim / 2]
  const float* factors = nullptr;  // [head_dim / 2] or nullptr
  float scale = 1.0f;
  bool halves = false;
};

inline RopeArgs MakeRopeArgs(float* q, int n_heads, int head_dim, const int32_t* positions,
                             const float* freqs, bool halves, float scale, const float* factors) {
  RopeArgs r;
  r.q = q;
  r.n_heads = n_heads;
  r.head_dim = head_dim;
  r.positions = positions;
  r.freqs = freqs;
  r.factors = factors;
  r.scale = scale;
  r.halves = halves;
  return r;
}

// Pair p of a head: the indices it rotates and its angle at pos.
__device__ __forceinline__ void RopePair(const RopeArgs& r, int p, int pos, int* a, int* b,
                                         float* c, float* s) {
  const int half = r.head_dim / 2;
  *a = r.halves ? p : 2 * p;
  *b = r.halves ? p + half : 2 * p + 1;
  float angle = static_cast<float>(pos) * r.freqs[p];
  if (r.factors) angle /= r.factors[p];
  angle *= r.scale;
  *c = cosf(angle);
  *s = sinf(angle);
}

// Value i of a row of heads, rotated (its pair read from the row, which is left unchanged).
__device__ __forceinline__ float RopedAt(const RopeArgs& r, const float* row, int i, int pos) {
  const int j = i % r.head_dim, head = i - j, half = r.head_dim / 2;
  const int p = r.halves ? j % half : j / 2;
  int a, b;
  float c, s;
  RopePair(r, p, pos, &a, &b, &c, &s);
  const float x0 = row[head + a], x1 = row[head + b];
  return j == a ? x0 * c - x1 * s : x0 * s + x1 * c;
}

}  // namespace pinfer::cuda
