// Names and row sizes of the KV formats. Encoding and decoding live in kv_codec.cc.
#include "kvcache/kv_dtype.h"

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

struct DtypeFacts {
  KvDtype dtype;
  std::string_view name;
  int block_values;  // values per block (1 for element formats)
  int block_bytes;   // bytes per block
  int row_header;    // bytes in front of each row (fp8's float32 scale)
};

constexpr DtypeFacts kFacts[] = {
    {KvDtype::kF32, "f32", 1, 4, 0},   {KvDtype::kF16, "f16", 1, 2, 0},
    {KvDtype::kBF16, "bf16", 1, 2, 0}, {KvDtype::kQ8_0, "q8_0", 32, 34, 0},
    {KvDtype::kQ4_0, "q4_0", 32, 18, 0}, {KvDtype::kFp8E4M3, "fp8", 1, 1, 4},
};

const DtypeFacts& FactsOf(KvDtype d) {
  for (const DtypeFacts& f : kFacts) {
    if (f.dtype == d) return f;
  }
  return kFacts[0];
}

}  // namespace

absl::StatusOr<KvDtype> ParseKvDtype(std::string_view name) {
  for (const DtypeFacts& f : kFacts) {
    if (f.name == name) return f.dtype;
  }
  if (name == "fp8_e4m3" || name == "e4m3") return KvDtype::kFp8E4M3;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown KV cache format '", Sv(name), "'; choose f32, f16, bf16, q8_0, q4_0 or fp8"));
}

std::string_view KvDtypeName(KvDtype d) { return FactsOf(d).name; }

absl::StatusOr<size_t> KvRowBytes(KvDtype d, int64_t n) {
  const DtypeFacts& f = FactsOf(d);
  if (n <= 0 || n % f.block_values != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV format ", Sv(f.name), " stores rows in blocks of ", f.block_values,
        " values, but this model's K/V row (kv_heads x head_dim) has ", n,
        " values; choose f32, f16, bf16 or fp8"));
  }
  return static_cast<size_t>(f.row_header) +
         static_cast<size_t>(n / f.block_values) * static_cast<size_t>(f.block_bytes);
}

}  // namespace pinfer
