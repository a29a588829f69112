#include "loaders/ggml_types.h"

#include <array>
#include <cctype>
#include <string>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

struct Entry {
  GgmlType type;
  GgmlTypeInfo info;
};

// Sizes follow the GGUF block layouts (see loaders/quants.h for the structs).
constexpr std::array<Entry, 20> kTypes = {{
    {GgmlType::kF32, {"F32", 1, 4, true}},       {GgmlType::kF16, {"F16", 1, 2, true}},
    {GgmlType::kQ4_0, {"Q4_0", 32, 18, true}},   {GgmlType::kQ4_1, {"Q4_1", 32, 20, true}},
    {GgmlType::kQ5_0, {"Q5_0", 32, 22, true}},   {GgmlType::kQ5_1, {"Q5_1", 32, 24, true}},
    {GgmlType::kQ8_0, {"Q8_0", 32, 34, true}},   {GgmlType::kQ8_1, {"Q8_1", 32, 36, false}},
    {GgmlType::kQ2_K, {"Q2_K", 256, 84, false}}, {GgmlType::kQ3_K, {"Q3_K", 256, 110, false}},
    {GgmlType::kQ4_K, {"Q4_K", 256, 144, true}}, {GgmlType::kQ5_K, {"Q5_K", 256, 176, true}},
    {GgmlType::kQ6_K, {"Q6_K", 256, 210, true}}, {GgmlType::kQ8_K, {"Q8_K", 256, 292, false}},
    {GgmlType::kI8, {"I8", 1, 1, false}},        {GgmlType::kI16, {"I16", 1, 2, false}},
    {GgmlType::kI32, {"I32", 1, 4, false}},      {GgmlType::kI64, {"I64", 1, 8, false}},
    {GgmlType::kF64, {"F64", 1, 8, false}},      {GgmlType::kBF16, {"BF16", 1, 2, true}},
}};

}  // namespace

const GgmlTypeInfo* FindGgmlTypeInfo(uint32_t id) {
  for (const Entry& e : kTypes) {
    if (static_cast<uint32_t>(e.type) == id) return &e.info;
  }
  return nullptr;
}

const GgmlTypeInfo& GgmlTypeInfoOf(GgmlType t) {
  return *FindGgmlTypeInfo(static_cast<uint32_t>(t));
}

size_t GgmlRowBytes(GgmlType t, int64_t n) {
  const GgmlTypeInfo& info = GgmlTypeInfoOf(t);
  return static_cast<size_t>(n / info.block_size) * info.block_bytes;
}

absl::StatusOr<GgmlType> ParseGgmlType(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string accepted;
  for (const Entry& e : kTypes) {
    if (!e.info.supported) continue;
    if (e.info.name == upper) return e.type;
    absl::StrAppend(&accepted, accepted.empty() ? "" : ", ", Sv(e.info.name));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown tensor type '", Sv(name), "'; accepted: ", accepted));
}

}  // namespace pinfer
