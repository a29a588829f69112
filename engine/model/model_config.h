// The hyper-parameters of a Llama-family decoder, read from GGUF metadata or a Hugging Face
// config.json. The architectures (engine/model/architecture.h) differ from llama's block by
// the features below: llama (Llama 2/3, Mistral, TinyLlama), qwen2 (Q/K/V biases), qwen3
// (per-head Q/K norms), gemma2 and gemma3 (GeGLU, scaled embeddings, post-norms, soft-capping,
// query scaling, sliding windows), phi3 (fused tensors, partial rotary, a sliding window).
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

// The attention of one layer (see ModelConfig::layers).
struct LayerAttention {
  // Sliding window in tokens. A query at position p attends to the keys at positions
  // max(0, p - window + 1) .. p: the last `window` positions, its own included (llama.cpp's
  // LLAMA_SWA_TYPE_STANDARD mask, Hugging Face's sliding_window). 0: full causal attention over
  // every position 0 .. p.
  int window = 0;
  float rope_theta = 10000.0f;   // RoPE base of this layer (gemma3: 10000 local, 1e6 global)
  float rope_freq_scale = 1.0f;  // linear RoPE scaling of this layer (gemma3: 1/8 global only)
  bool full() const { return window == 0; }
};

// The feed-forward activation: SwiGLU silu(gate) * up, or GeGLU gelu(gate) * up with the
// tanh approximation of GELU (gemma's gelu_pytorch_tanh, ggml's gelu).
enum class FfnActivation { kSilu, kGeluTanh };

struct ModelConfig {
  std::string arch = "llama";  // general.architecture: a name in SupportedArchitectures()
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
  // [rope_dims() / 2] per-pair divisors (Llama 3.1's "llama3" scaling; GGUF tensor
  // rope_freqs.weight); empty: all 1.
  std::vector<float> rope_freq_factors;
  bool qkv_bias = false;         // qwen2
  bool tied_embeddings = false;  // output projection reuses token_embd
  // RoPE rotates the first n_rot values of each head (pairs in rope_style's order over those
  // n_rot, frequencies theta^(-2i / n_rot)) and leaves the rest; 0 means head_dim (phi3 with a
  // partial_rotary_factor < 1 rotates fewer).
  int n_rot = 0;
  // Features beyond the llama block (all off for llama and qwen2):
  bool qk_norm = false;           // qwen3, gemma3: RMSNorm of each head of Q and K before RoPE
  bool post_norms = false;        // gemma2/3: RMSNorm of attention and FFN outputs before adding
  bool scale_embeddings = false;  // gemma2/3: token embeddings times sqrt(dim)
  FfnActivation ffn_act = FfnActivation::kSilu;  // gemma2/3: kGeluTanh
  // Attention scores q.k become attn_softcap * tanh(q.k / attn_softcap) (gemma2: 50); 0: off.
  float attn_softcap = 0;
  // Logits become final_softcap * tanh(logit / final_softcap) (gemma2: 30); 0: off.
  float final_softcap = 0;
  // > 0: q is multiplied by query_scale after RoPE and scores are not scaled again (gemma:
  // query_pre_attn_scalar^-1/2; phi3: 1 / sqrt(head_dim), as llama.cpp orders it); 0: scores
  // are multiplied by 1 / sqrt(head_dim).
  float query_scale = 0;
  // Per-layer attention: [n_layers] entries, or empty when every layer is full attention with
  // rope_theta and rope_freq_scale above. The loaders fill it for models with sliding windows
  // (Mistral 7B v0.1: every layer 4096; gemma2: every other layer; gemma3: five local layers of
  // 1024 for each global one, with their own RoPE bases). Read it through layer(l), which
  // resolves the empty case. rope_freq_factors (when present) apply to every layer.
  std::vector<LayerAttention> layers;

  int q_dim() const { return n_heads * head_dim; }
  int rope_dims() const { return n_rot > 0 ? n_rot : head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  // Layer l's attention (0 <= l < n_layers).
  LayerAttention layer(int l) const;
  // Whether any layer has a sliding window; the largest window (0 when none); how many layers
  // have one.
  bool has_sliding_window() const { return max_window() > 0; }
  int max_window() const;
  int n_window_layers() const;
  // Sets `layers` the way llama.cpp's set_swa_pattern does: with period n > 0, layer l is a
  // window layer when l % n < n - 1 (every n-th layer, counting from 1, is full attention: n 1
  // makes none a window layer); period 0 makes every layer a window layer. Window layers get
  // (window, swa_theta, swa_scale), full layers (0, rope_theta, rope_freq_scale). Call it after
  // n_layers, rope_theta and rope_freq_scale are set. window <= 0 clears `layers`.
  void SetSlidingWindow(int window, int period, float swa_theta, float swa_scale);
  // Checks the shape is self-consistent (positive sizes, n_heads % n_kv_heads == 0, ...).
  absl::Status Validate() const;
};

// A KV cache config with this model's geometry (layers, kv heads, head dim, and its layers'
// sliding windows, so a paged cache gives them layer groups) and a format; pool size, layout
// and limits are left for the caller.
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
