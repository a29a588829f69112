// Named model shapes (llama2-7b, gemma3-4b, ...) and the tensors a model of a given shape
// holds (llama.cpp's names and layout for its architecture), with the storage type each gets under
// a file type such as Q4_K_M. Shared by `synth` (writes such a file), `plan` (sizes one without the
// file) and `quantize`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "loaders/ggml_types.h"

namespace pinfer {

// Published shapes: llama2-7b, llama2-13b, mistral-7b, mistral-7b-v0.1 (with its window),
// llama3-8b, qwen2-7b, qwen3-8b, gemma3-4b, gemma3-12b, phi3-mini, tinyllama-1b; a few MB each:
// tiny (llama), tiny-qwen3, tiny-gemma2, tiny-gemma3, tiny-phi3, tiny-mistral-swa.
absl::StatusOr<ModelConfig> NamedShape(std::string_view name);
std::vector<std::string> NamedShapeNames();

// File types: a uniform type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q6_K) or a
// llama.cpp-style mix (Q4_K_M, Q5_K_M).
struct FileType {
  std::string name;
  GgmlType base;
  bool k_mix = false;  // *_K_M: Q6_K on output and on half of attn_v / ffn_down
};

// general.file_type as llama.cpp numbers its file types (llama_ftype): F32 0, F16 1, Q4_0 2,
// Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9, Q4_K_M 15, Q5_K_M 17, Q6_K 18, BF16 32.
uint32_t LlamaFileTypeId(const FileType& ft);
absl::StatusOr<FileType> ParseFileType(std::string_view name);

struct TensorPlan {
  std::string name;           // GGUF name, e.g. "blk.3.attn_q.weight"
  std::vector<int64_t> dims;  // ggml order: dims[0] = row length
  GgmlType type;
  std::string fallback_note;  // non-empty when the wanted type did not fit the row length
};

// Every tensor of a model of this shape stored as `ft`; norms stay F32, and a type whose
// block does not divide a row falls back (per tensor) to one that does, noted in the plan.
std::vector<TensorPlan> PlanTensors(const ModelConfig& config, const FileType& ft);

// Bytes of the data of those tensors (exact, per storage type).
uint64_t TensorBytes(const std::vector<TensorPlan>& plan);

}  // namespace pinfer
