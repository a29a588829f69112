// Hugging Face checkpoints: config.json -> ModelConfig, the quantization settings, and the
// mapping from HF tensor names to the engine's GGUF-style names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "loaders/quant_config.h"
#include "nlohmann/json.hpp"

namespace pinfer {

struct HfConfig {
  std::string architecture;          // the model class: see engine/model/hf_architecture.h
  ModelConfig model;                 // rope_style kHalves; the class's architecture features
  std::optional<QuantConfig> quant;  // from "quantization_config" when present
};

// Parses config.json text; `source` names the file in errors. Required keys: architectures,
// hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size. Defaults:
// num_key_value_heads = heads, head_dim = hidden / heads, rope_theta 10000, rms_norm_eps 1e-6,
// tie_word_embeddings false, max_position_embeddings 0 (unknown). Unknown architectures are
// refused naming them.
// The text is parsed with kConfigJsonLimits (json_strict.h).
absl::StatusOr<HfConfig> ParseHfConfig(std::string_view json_text, std::string_view source);
// The same from an already parsed document (one parsed with those limits).
absl::StatusOr<HfConfig> HfConfigFromJson(const nlohmann::json& j, std::string_view source);

// Reads <folder>/config.json (name = the folder's name) and, when config.json has no
// quantization_config, quantize_config.json / quant_config.json (see LoadQuantConfig).
absl::StatusOr<HfConfig> LoadHfConfig(const std::string& folder);

// "model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight", etc. GPTQ/AWQ tensors keep
// their suffix ("...q_proj.qweight" -> "blk.3.attn_q.qweight"). NotFound for names the engine
// does not use (e.g. rotary_emb.inv_freq), naming the tensor.
absl::StatusOr<std::string> HfToGgufTensorName(std::string_view hf_name);

}  // namespace pinfer
