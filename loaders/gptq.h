// 4-bit GPTQ and AWQ linear layers: shape checks, a float reference dequantization, and a repack
// into the engine's GGUF Q4_1 blocks.
//
// Packed layouts (all int32 little-endian words of eight 4-bit values, lowest nibble first):
//   GPTQ: qweight [in/8, out]   word (r, o) holds inputs 8r..8r+7 of output o, nibble j = 8r+j.
//         qzeros  [groups, out/8] word (g, c) holds outputs 8c..8c+7, nibble j = output 8c+j.
//         scales  [groups, out];   g_idx [in] (int32): group of each input column (act-order).
//         W[o][i] = scale[g][o] * (q - (zero_nibble + zero_offset)), g = g_idx[i] or i / group.
//   AWQ (GEMM): qweight [in, out/8], word (i, c) holds outputs 8c..8c+7 of input i in the
//         interleaved order [0, 2, 4, 6, 1, 3, 5, 7]: nibble j holds output 8c + order[j].
//         qzeros [groups, out/8] in the same order; scales [groups, out]; no g_idx.
//         W[o][i] = scale[g][o] * (q - zero), g = i / group_size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "loaders/quant_config.h"
#include "loaders/quants.h"
#include "loaders/safetensors.h"

namespace pinfer {

// One packed linear layer. The StTensor views borrow the file's memory: the SafetensorsFile /
// SafetensorsModel (or test buffer) they point into must outlive this object.
struct PackedLinear {
  std::string name;  // prefix, e.g. "model.layers.0.mlp.gate_proj"
  QuantMethod method = QuantMethod::kGptq;
  int64_t in_features = 0, out_features = 0;
  int64_t group_size = 0;  // effective: in_features when the config says -1
  int64_t n_groups = 0;
  int zero_offset = 0;  // added to stored zeros (QuantConfig::zero_offset)
  StTensor qweight, qzeros, scales;
  std::optional<StTensor> g_idx;  // GPTQ only, [in_features]
};

// Checks dtypes (I32 packed tensors and g_idx, F16/BF16/F32 scales) and that the shapes agree
// with the layouts above and `cfg`; errors name the layer, the tensor and the shapes found.
absl::StatusOr<PackedLinear> MakePackedLinear(const QuantConfig& cfg, std::string_view name,
                                              const StTensor& qweight, const StTensor& qzeros,
                                              const StTensor& scales, const StTensor* g_idx);

// Looks up "<prefix>.qweight", ".qzeros", ".scales" and (GPTQ, optional) ".g_idx".
absl::StatusOr<PackedLinear> FindPackedLinear(const SafetensorsModel& model, const QuantConfig& cfg,
                                              std::string_view prefix);

// Float reference: W[o * in_features + i], out_features x in_features (the HF Linear layout).
std::vector<float> DequantizePacked(const PackedLinear& layer);

// The layer as Q4_1 rows: out_features rows of in_features / 32 blocks, each block 32
// consecutive input columns (after `perm`) of one output, with d = scale (fp16, exact for F16
// scales) and m = fp16(-zero * scale), so d * q + m equals scale * (q - zero) except for the
// fp16 rounding of m: |error| <= |zero * scale| * 2^-11 (or 2^-25 when m is subnormal in fp16).
struct Q4_1Weights {
  int64_t rows = 0, cols = 0;     // out_features, in_features
  std::vector<BlockQ4_1> blocks;  // rows * cols / 32, row-major
  // Empty when the input columns keep their order. Otherwise column k of the repacked matrix is
  // original input column perm[k]: multiply with x'[k] = x[perm[k]] (one gather per matmul).
  std::vector<int32_t> perm;
};

// Requires group_size % 32 == 0 and in_features % 32 == 0; act-order g_idx is handled by
// sorting input columns by group (stable), which must leave every 32-column block inside one
// group. Refuses a zero * scale that overflows fp16.
absl::StatusOr<Q4_1Weights> RepackToQ4_1(const PackedLinear& layer);

}  // namespace pinfer
