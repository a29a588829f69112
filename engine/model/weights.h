// The weights of a Llama-family model, kept in their storage type (F32, F16, Q4_K, ...): the
// forward pass multiplies against them directly, never holding a float copy of a matrix.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "loaders/ggml_types.h"

namespace pinfer {

class GgufFile;

// A [rows x cols] matrix, row-major in its storage type: row r starts at data + r * row_bytes.
// Not owned: points into a mapped file or a buffer owned by the Model.
struct WeightMatrix {
  std::string name;
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
  const uint8_t* data = nullptr;
  // Act-order input permutation (GPTQ desc_act repacked to Q4_1): column k of the stored matrix
  // is input column input_perm[k], so MatMul multiplies with x'[k] = x[input_perm[k]]. Empty
  // means identity.
  std::vector<int32_t> input_perm;
  // The same matrix in loaders/quants_packed.h's row-interleaved layout (ceil(rows / 8) groups
  // of 8 rows), or null. Set only on the CPU backend's own copies of the matrices it repacked
  // at load (engine/cpu/repack.h), never on the Model's: the backend owns those bytes. `data`
  // still addresses the file's layout (its pages released after repacking; reading them faults
  // them back in from the file), which a device backend uploads.
  const uint8_t* packed = nullptr;
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  uint64_t bytes() const { return static_cast<uint64_t>(rows) * row_bytes; }
};

// A fused tensor (phi3's attn_qkv, its ffn_up holding gate and up) is bound as views of its
// row ranges: the rows of a matrix are independent, so a view multiplies exactly as the whole.
struct LayerWeights {
  std::vector<float> attn_norm;       // [dim]
  WeightMatrix wq, wk, wv;            // [q_dim x dim], [kv_dim x dim], [kv_dim x dim]
  std::vector<float> bq, bk, bv;      // [q_dim], [kv_dim], [kv_dim] (qwen2), else empty
  std::vector<float> q_norm, k_norm;  // [head_dim] (qk_norm), else empty
  WeightMatrix wo;                    // [dim x q_dim]
  std::vector<float> attn_post_norm;  // [dim] (post_norms), else empty
  std::vector<float> ffn_norm;        // [dim]
  WeightMatrix w_gate, w_up;          // [n_ff x dim]
  WeightMatrix w_down;                // [dim x n_ff]
  std::vector<float> ffn_post_norm;   // [dim] (post_norms), else empty
};

// A [rows x cols] matrix of `type` over `data` (not owned), row_bytes as the type packs
// `cols` values (GgmlRowBytes); no input permutation.
WeightMatrix MatrixView(std::string name, GgmlType type, int64_t rows, int64_t cols,
                        const uint8_t* data);

// Rows [begin, begin + rows) of `m` as a matrix of its own (no copy), named `name`.
WeightMatrix RowView(const WeightMatrix& m, int64_t begin, int64_t rows, std::string name);

struct ModelWeights {
  WeightMatrix tok_embd;                       // [n_vocab x dim]
  std::vector<LayerWeights> layers;            // [n_layers]
  std::vector<float> output_norm;              // [dim]
  WeightMatrix output;                         // [n_vocab x dim] (tok_embd when tied)
  std::map<GgmlType, uint64_t> bytes_by_type;  // every tensor's bytes, by storage type
  uint64_t total_bytes() const;
};

// Binds the tensors of a GGUF file (names as llama.cpp writes them), checking every shape
// against the config and every type is one this engine multiplies. The file must outlive
// the returned weights.
absl::StatusOr<ModelWeights> WeightsFromGguf(const GgufFile& file, const ModelConfig& config);

// A small float vector (norm weights, biases) from a tensor of any supported type.
absl::StatusOr<std::vector<float>> ToFloatVector(GgmlType type, const uint8_t* data, int64_t n);

}  // namespace pinfer
