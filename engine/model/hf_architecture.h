// The Hugging Face model classes of each architecture (engine/model/architecture.h) and the
// config.json keys that carry its features, as transformers reads them:
//
//   LlamaForCausalLM, MistralForCausalLM   llama (Mistral: sliding_window on every layer)
//   Qwen2ForCausalLM                       qwen2
//   Qwen3ForCausalLM                       qwen3
//   Gemma2ForCausalLM                      gemma2: query_pre_attn_scalar, attn_logit_softcapping,
//                                          final_logit_softcapping, sliding_window (even layers)
//   Gemma3ForCausalLM                      gemma3: query_pre_attn_scalar, sliding_window with
//                                          sliding_window_pattern or layer_types,
//                                          rope_local_base_freq, rope_scaling on full layers
//   Phi3ForCausalLM                        phi3: partial_rotary_factor, sliding_window
//
// Gemma's checkpoints store norm weights w that RMSNorm uses as (1 + w); GGUF files and the
// engine hold 1 + w (see architecture.h), so the loader adds 1 and the exporter subtracts it.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/model/model_config.h"
#include "nlohmann/json.hpp"

namespace pinfer {

// The engine architecture of a model class (sets m's architecture features); Unimplemented,
// naming the supported classes, for others.
absl::Status SetHfArchitecture(std::string_view hf_class, std::string_view source, ModelConfig* m);

// The architecture's own config.json keys into m, after the common ones (sizes, rope_theta,
// rope_scaling) are read. Errors name the key and the file.
absl::Status ReadHfArchitectureKeys(const nlohmann::json& j, std::string_view source,
                                    ModelConfig* m);

// The model class and model_type config.json states for m ("Gemma3ForCausalLM",
// "gemma3_text"), and its architecture keys (the inverse of ReadHfArchitectureKeys) added to
// cfg. FailedPrecondition when m has a feature config.json cannot state (a window pattern
// other than the class's).
absl::Status WriteHfArchitectureKeys(const ModelConfig& m, nlohmann::json* cfg);

// Whether the checkpoint stores gemma's (1 + w) norm weights as w.
bool HfNormsStoreOffset(const ModelConfig& m);

}  // namespace pinfer
