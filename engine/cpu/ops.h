// Element-wise pieces of the Llama block, on float32 vectors.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"

namespace pinfer {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; out may alias x.
void RmsNorm(const float* x, const float* w, int n, float eps, float* out);

// Rotates each head's pairs by pos * theta^(-2i/head_dim) in place; vec: [n_heads x head_dim].
// freq_factors: [head_dim / 2] divisors per pair or nullptr; freq_scale multiplies the angle
// (see ModelConfig's RoPE scaling fields).
void ApplyRope(float* vec, int n_heads, int head_dim, int pos, float theta, RopeStyle style,
               float freq_scale = 1.0f, const float* freq_factors = nullptr);
// The per-pair frequencies ApplyRope uses, theta^(-2i/head_dim) for i < head_dim / 2, computed
// here once so that other backends rotate by exactly the same angles (a GPU's powf differs in
// the last bits, which a position of thousands turns into visible errors).
std::vector<float> RopeFrequencies(float theta, int head_dim);

// gate[i] = silu(gate[i]) * up[i].
void SwiGlu(float* gate, const float* up, int64_t n);

// x[i] += y[i].
void AddInPlace(float* x, const float* y, int64_t n);

}  // namespace pinfer
