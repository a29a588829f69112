#include "engine/cpu/ops.h"

#include <cmath>

namespace pinfer {

void RmsNorm(const float* x, const float* w, int n, float eps, float* out) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

namespace {

float RopeFrequency(float theta, int i, int head_dim) {
  return 1.0f / std::pow(theta, static_cast<float>(2 * i) / head_dim);
}

}  // namespace

std::vector<float> RopeFrequencies(float theta, int head_dim) {
  std::vector<float> f(static_cast<size_t>(std::max(head_dim / 2, 0)));
  for (int i = 0; i < head_dim / 2; ++i)
    f[static_cast<size_t>(i)] = RopeFrequency(theta, i, head_dim);
  return f;
}

void ApplyRope(float* vec, int n_heads, int head_dim, int pos, float theta, RopeStyle style,
               float freq_scale, const float* freq_factors, int n_rot) {
  const int dims = n_rot > 0 ? n_rot : head_dim;
  const int half = dims / 2;
  for (int i = 0; i < half; ++i) {
    const float freq = RopeFrequency(theta, i, dims);
    float angle = static_cast<float>(pos) * freq;
    if (freq_factors) angle /= freq_factors[i];
    angle *= freq_scale;
    const float c = std::cos(angle), s = std::sin(angle);
    for (int h = 0; h < n_heads; ++h) {
      float* v = vec + static_cast<int64_t>(h) * head_dim;
      const int a = style == RopeStyle::kAdjacentPairs ? 2 * i : i;
      const int b = style == RopeStyle::kAdjacentPairs ? 2 * i + 1 : i + half;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

void SwiGlu(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void GeGlu(float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x))) * up[i];
  }
}

void SoftCap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

void Scale(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void AddInPlace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace pinfer
