// Writes a loaded Model (from a Hugging Face folder or a GGUF file) as a GGUF file llama.cpp
// accepts: general.architecture (any of SupportedArchitectures()), the {arch}.* hyper-parameters
// under llama.cpp's names, the tokenizer as tokenizer.ggml.* ("llama" SentencePiece vocabularies
// with scores, "gpt2" byte-level BPE with merges and pre), and the tensors stored as a file type.
//
// Hugging Face llama checkpoints rotate RoPE halves; GGUF "llama" files rotate adjacent pairs.
// Like llama.cpp's convert_hf_to_gguf.py, the rows of attn_q / attn_k are permuted per head
// (GGUF row 2i + j of a head = HF row i + j * head_dim / 2), so the file runs with adjacent
// pairs and gives the same logits. qwen2 keeps the halves order (GGUF qwen2 uses NEOX RoPE).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/convert/tensor_progress.h"
#include "engine/model/model.h"
#include "engine/model/model_shapes.h"
#include "loaders/gguf.h"

namespace pinfer {

// Row `r` of `w` as floats in the GGUF file's row order and original input-column order
// (undoing any act-order permutation): dst[w.cols].
void WeightRowForGguf(const WeightMatrix& w, int64_t r, float* dst);

// The scores of a SentencePiece vocabulary: the spec's own, or, for a Hugging Face Llama-2
// tokenizer (merge ranks, no scores), -(rank + 1) for the piece each merge makes and
// -(merges + 1 + id) for pieces no merge makes, so higher scores merge first as ranks did.
std::vector<float> SentencePieceScores(const TokenizerSpec& spec);

// Adds metadata and tensors (PlanTensors(config, ft) order and types, quantized with
// QuantizeRow while the file is written). The model must outlive the writer's use.
// progress (optional) is called after each tensor is made, while the file is written.
absl::Status AddModelToGguf(const Model& model, const FileType& ft, GgufWriter* w,
                            const TensorProgress& progress = {});

absl::Status WriteModelAsGguf(const Model& model, const FileType& ft, const std::string& path,
                              const TensorProgress& progress = {});

}  // namespace pinfer
