// Requantizes a float GGUF (F32, F16 or BF16 tensors) into another file type (Q8_0, Q4_0,
// Q4_K_M, ...): every tensor gets the storage type PlanTensors picks for the model's shape
// (norms F32; in *_K_M mixes Q6_K on the output and on half of attn_v / ffn_down), a type
// whose block does not divide a tensor's rows falls back per tensor (reported through
// `note`), and all metadata is copied with general.file_type set to the new type.
// Tensors are converted one at a time while the file is written, on `threads` threads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/convert/tensor_progress.h"
#include "loaders/ggml_types.h"

namespace pinfer {

struct QuantizeOptions {
  int threads = 0;  // 0: all hardware threads
  // Called once per tensor that does not get the file type's own storage type, with a line
  // naming the tensor and why (block size does not divide its rows; kept as it was).
  std::function<void(const std::string& line)> note;
  // Called once per tensor after it is converted and written (progress lines); may be empty.
  TensorProgress progress;
};

struct QuantizeSummary {
  int tensors = 0;
  int fallbacks = 0;  // tensors stored in another type than planned for the file type
  uint64_t in_bytes = 0, out_bytes = 0;  // tensor data only
  std::map<GgmlType, int> tensors_by_type;
};

// in_path must hold only F32/F16/BF16 tensors (FailedPrecondition naming the first that is
// not). file_type: one ParseFileType accepts (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q6_K, Q4_K_M, Q5_K_M).
absl::StatusOr<QuantizeSummary> QuantizeGguf(const std::string& in_path,
                                             const std::string& out_path,
                                             std::string_view file_type,
                                             const QuantizeOptions& options = {});

}  // namespace pinfer
