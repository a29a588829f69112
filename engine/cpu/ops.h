// Element-wise pieces of the Llama block, on float32 vectors.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"

namespace pinfer {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; out may alias x.
void RmsNorm(const float* x, const float* w, int n, float eps, float* out);

// Rotates each head's pairs by pos * theta^(-2i/n_rot) in place; vec: [n_heads x head_dim].
// Only the first n_rot values of each head rotate (0: all head_dim), pairs taken in `style`'s
// order within them. freq_factors: [n_rot / 2] divisors per pair or nullptr; freq_scale
// multiplies the angle (see ModelConfig's RoPE scaling fields).
void ApplyRope(float* vec, int n_heads, int head_dim, int pos, float theta, RopeStyle style,
               float freq_scale = 1.0f, const float* freq_factors = nullptr, int n_rot = 0);
// The per-pair frequencies ApplyRope uses, theta^(-2i/head_dim) for i < head_dim / 2, computed
// here once so that other backends rotate by exactly the same angles (a GPU's powf differs in
// the last bits, which a position of thousands turns into visible errors).
std::vector<float> RopeFrequencies(float theta, int head_dim);

// gate[i] = silu(gate[i]) * up[i].
void SwiGlu(float* gate, const float* up, int64_t n);

// gate[i] = gelu(gate[i]) * up[i], GELU's tanh form:
// 0.5 x (1 + tanh(sqrt(2 / pi) x (1 + 0.044715 x^2))) (PyTorch's gelu(approximate="tanh")).
void GeGlu(float* gate, const float* up, int64_t n);

// x[i] = cap * tanh(x[i] / cap) (logit soft-capping); cap > 0.
void SoftCap(float* x, int64_t n, float cap);

// x[i] *= s.
void Scale(float* x, int64_t n, float s);

// x[i] += y[i].
void AddInPlace(float* x, const float* y, int64_t n);

}  // namespace pinfer
