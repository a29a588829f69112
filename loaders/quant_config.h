// How a GPTQ or AWQ checkpoint was quantized: read from config.json's "quantization_config",
// AutoGPTQ's quantize_config.json or AutoAWQ's quant_config.json.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pinfer {

enum class QuantMethod { kGptq, kAwq };

struct QuantConfig {
  QuantMethod method = QuantMethod::kGptq;
  int bits = 4;           // only 4 is accepted by the parsers
  int group_size = 128;   // input columns per (scale, zero) group; -1 = one group per row
  bool desc_act = false;  // GPTQ act-order: g_idx permutes input columns into groups
  bool sym = true;
  // Added to each stored zero nibble before use. GPTQ v1 checkpoints (AutoGPTQ, "gptq"
  // checkpoint_format, the common case) store zero - 1, so 1; GPTQModel's "gptq_v2" and AWQ
  // store the zero itself, so 0.
  int zero_offset = 1;
};

// Parses one quantization JSON object (the value of "quantization_config", or a whole
// quantize_config.json / quant_config.json). `default_method` applies when the object has no
// "quant_method" (AutoGPTQ and AutoAWQ files omit it). Accepts the AutoAWQ spellings w_bit,
// q_group_size and refuses: bits other than 4, methods other than gptq/awq, AWQ versions other
// than GEMM (GEMV packs differently), and group sizes that are neither -1 nor positive.
// `source` names the file in errors.
absl::StatusOr<QuantConfig> ParseQuantConfigJson(std::string_view json_text,
                                                 std::string_view source,
                                                 QuantMethod default_method = QuantMethod::kGptq);

// The quantization of the checkpoint in `folder`: config.json's quantization_config, else
// quantize_config.json (GPTQ), else quant_config.json (AWQ); std::nullopt when none says the
// model is quantized.
absl::StatusOr<std::optional<QuantConfig>> LoadQuantConfig(const std::string& folder);

std::string_view QuantMethodName(QuantMethod m);  // "gptq" | "awq"

}  // namespace pinfer
