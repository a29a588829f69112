// The hyper-parameters of a Llama-family decoder (llama: Llama 2/3, Mistral, TinyLlama;
// qwen2: the same with Q/K/V biases), read from GGUF metadata or a Hugging Face config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kvcache/kv_cache.h"

namespace pinfer {

class GgufFile;
class GgufWriter;

// Which elements RoPE rotates together. GGUF "llama" files use adjacent pairs (x[2i], x[2i+1]);
// Hugging Face checkpoints and GGUF "qwen2" rotate halves (x[i], x[i + head_dim/2]).
enum class RopeStyle { kAdjacentPairs, kHalves };

struct ModelConfig {
  std::string arch = "llama";  // "llama" | "qwen2"
  std::string name;            // general.name or the folder name
  int n_vocab = 0;
  int dim = 0;   // residual width (embedding length)
  int n_ff = 0;  // feed-forward width
  int n_layers = 0;
  int n_heads = 0;         // query heads
  int n_kv_heads = 0;      // key/value heads (grouped-query attention when < n_heads)
  int head_dim = 0;        // dim / n_heads unless the file says otherwise
  int context_length = 0;  // trained context the file states
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::kAdjacentPairs;
  // RoPE scaling, as llama.cpp applies it: pair i of a head at position pos rotates by
  //   pos * rope_theta^(-2i / head_dim) / rope_freq_factors[i] * rope_freq_scale.
  float rope_freq_scale = 1.0f;  // linear scaling ("linear", factor f): 1 / f
  // [head_dim / 2] per-pair divisors (Llama 3.1's "llama3" scaling; GGUF tensor
  // rope_freqs.weight); empty: all 1.
  std::vector<float> rope_freq_factors;
  bool qkv_bias = false;         // qwen2
  bool tied_embeddings = false;  // output projection reuses token_embd

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  // Checks the shape is self-consistent (positive sizes, n_heads % n_kv_heads == 0, ...).
  absl::Status Validate() const;
};

// A KV cache config with this model's geometry (layers, kv heads, head dim) and a format;
// pool size, layout and limits are left for the caller.
KvCacheConfig KvCacheConfigFor(const ModelConfig& c, KvDtype dtype);

// Writes the {arch}.* hyper-parameter keys as llama.cpp names them (the inverse of
// ModelConfigFromGguf).
void SetHyperParameters(const ModelConfig& c, GgufWriter* w);

// Per-pair RoPE divisors of Hugging Face's "llama3" rope_scaling (Llama 3.1 and later):
// 1 for wavelengths under original_max_position_embeddings / high_freq_factor, `factor` for
// those over original / low_freq_factor, a smooth blend between. [head_dim / 2] values.
std::vector<float> Llama3RopeFactors(float theta, int head_dim, double factor,
                                     double low_freq_factor, double high_freq_factor,
                                     double original_max_position_embeddings);

// From GGUF metadata ({arch}.embedding_length, ...) and the optional rope_freqs.weight tensor.
// Errors name the missing or bad key.
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace pinfer
