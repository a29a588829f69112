// KV cache number formats, chosen independently of the weights' format.
//
// A "row" is one token's keys (or values) of one layer: n = kv_heads x head_dim values.
// Block formats quantize along that row in blocks of 32, as GGUF does (q8_0: 34 bytes per 32
// values, q4_0: 18 per 32), so n must be a multiple of 32 for them.
// fp8 is e4m3 (bias 7, max 448, no infinities) with one float32 scale per row stored in front
// of the row's bytes: scale = max|x| / 448, so every row uses the full e4m3 range.
// Encoding and decoding rows: kv_codec.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace pinfer {

enum class KvDtype { kF32, kF16, kBF16, kQ8_0, kQ4_0, kFp8E4M3 };

constexpr KvDtype kAllKvDtypes[] = {KvDtype::kF32,  KvDtype::kF16,  KvDtype::kBF16,
                                    KvDtype::kQ8_0, KvDtype::kQ4_0, KvDtype::kFp8E4M3};

absl::StatusOr<KvDtype> ParseKvDtype(std::string_view name);  // f32 f16 bf16 q8_0 q4_0 fp8
std::string_view KvDtypeName(KvDtype d);

// Bytes of one encoded row of n values; InvalidArgument when n does not suit the format.
absl::StatusOr<size_t> KvRowBytes(KvDtype d, int64_t n);

}  // namespace pinfer
