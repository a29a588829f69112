// Storage types of GGUF tensors (the ggml type ids, fixed by the file format) and their sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace pinfer {

// Values are the on-disk ids of GGUF's tensor type field; do not renumber.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct GgmlTypeInfo {
  std::string_view name;  // "F32", "Q4_K", ... as llama.cpp prints them
  int64_t block_size;     // values per block (1 for plain types)
  size_t block_bytes;     // bytes per block
  bool supported;         // this engine can dequantize / multiply it
};

// Facts for a type id; nullptr for ids this build does not know (a file's "unknown type").
const GgmlTypeInfo* FindGgmlTypeInfo(uint32_t id);
const GgmlTypeInfo& GgmlTypeInfoOf(GgmlType t);

// Bytes of a row of n values; n must be a multiple of the block size (checked by callers).
size_t GgmlRowBytes(GgmlType t, int64_t n);

// "q4_0", "Q4_0", "f16", ... -> type; error names the accepted spellings.
absl::StatusOr<GgmlType> ParseGgmlType(std::string_view name);

}  // namespace pinfer
