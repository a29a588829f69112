// A callback told about each tensor as a converter writes it (quantize, convert), for
// progress lines; called on the writing thread, in file order, after the tensor's bytes are made.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "loaders/ggml_types.h"

namespace pinfer {

struct TensorProgressInfo {
  int index = 0;  // 1-based position in the file
  int total = 0;  // tensors in the file
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: dims[0] is the row length
  std::string from;           // the source's storage ("F16", "safetensors F32", ...)
  GgmlType to = GgmlType::kF32;
  uint64_t out_bytes = 0;  // bytes written for the tensor
};

using TensorProgress = std::function<void(const TensorProgressInfo&)>;

}  // namespace pinfer
