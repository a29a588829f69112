// A float64 forward pass written from llama.cpp's graphs (src/models/llama.cpp, qwen2.cpp,
// qwen3.cpp, gemma2.cpp, gemma3.cpp, phi3.cpp there) over a model's dequantized weights: one
// sequence, every token attending as its layer says (sliding windows, soft-capping), no KV
// cache, no batching, no quantized KV. For checking the engine's forward pass on small
// models; slow (it keeps every weight as a double).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/model.h"

namespace pinfer::testing {

struct ReferenceOptions {
  // GELU as llama.cpp's CPU backend computes it (ggml-cpu's GGML_GELU_FP16): the input
  // rounded to half, GELU of that, the result rounded to half (a table of 65536 halves; 0
  // below -10, x above 10). On the tiny gemma models this alone moves the logits by 3-4e-4
  // relative from the exact tanh GELU that this reference, the engine and Hugging Face use.
  bool ggml_cpu_gelu = false;
  // Each GELU input multiplied by (1 + gelu_input_jitter x u), u in [-1, 1) from a fixed
  // pseudo-random sequence (the same in every call): differences of the size a float32
  // computation has from this one, to measure how far ggml_cpu_gelu's rounding steps carry
  // them (a value near a half-precision rounding boundary jumps a whole half step).
  double gelu_input_jitter = 0;
};

// The logits after the last of `tokens` (positions 0, 1, ...): [n_vocab].
std::vector<double> ReferenceLogits(const Model& model, const std::vector<int32_t>& tokens,
                                    const ReferenceOptions& options = {});

}  // namespace pinfer::testing
