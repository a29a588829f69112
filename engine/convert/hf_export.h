// Writes a loaded Model as a Hugging Face folder: config.json, model.safetensors and
// tokenizer.json + tokenizer_config.json. The inverse of Model::FromHfFolder, for tests and for
// handing a GGUF model to Hugging Face tooling.
//
// GGUF "llama" files rotate RoPE adjacent pairs; Hugging Face checkpoints rotate halves, so the
// rows of q_proj / k_proj are permuted back per head (HF row i + j * head_dim / 2 = GGUF row
// 2i + j). Quantized weights are dequantized to the chosen float dtype.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "engine/model/model.h"
#include "loaders/safetensors.h"

namespace pinfer {

// tokenizer.json text for a tokenizer spec: SentencePiece vocabularies as Hugging Face's
// Llama-2 layout (BPE with byte_fallback, merges made from the scores: the pair making the
// higher-scoring piece merges first), byte-level BPE with pre "gpt2". Other BPE
// pre-tokenizers are refused (their regexes are not written back).
absl::StatusOr<std::string> HfTokenizerJson(const TokenizerSpec& spec);

// Writes the folder (created if absent; files replaced). dtype: F32, F16 or BF16.
absl::Status WriteHfFolder(const Model& model, const std::string& folder,
                           StDtype dtype = StDtype::kF32);

}  // namespace pinfer
