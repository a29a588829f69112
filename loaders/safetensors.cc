// SafetensorsFile: header parsing and validation, plus dtype helpers.
#include "loaders/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "loaders/absl_compat.h"
#include "loaders/fp16.h"
#include "loaders/json_strict.h"

namespace pinfer {
namespace {

struct DtypeRow {
  StDtype t;
  std::string_view name;
  size_t size;
};
constexpr DtypeRow kDtypes[] = {
    {StDtype::kF32, "F32", 4}, {StDtype::kF16, "F16", 2}, {StDtype::kBF16, "BF16", 2},
    {StDtype::kI32, "I32", 4}, {StDtype::kI8, "I8", 1},   {StDtype::kU8, "U8", 1},
};

absl::Status Bad(const std::string& path, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": ", Sv(what), " (the safetensors file is malformed; re-export it)"));
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Parses one tensor entry; offsets are relative to the data section of `data_size` bytes.
absl::Status ParseEntry(const std::string& path, const std::string& name, const nlohmann::json& e,
                        size_t data_size, StTensor* t, uint64_t* begin) {
  const std::string who = absl::StrCat("tensor '", name, "'");
  if (!e.is_object()) return Bad(path, absl::StrCat(who, " is not a JSON object"));
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!e.contains(key)) return Bad(path, absl::StrCat(who, " has no \"", key, "\""));
  }
  if (!e["dtype"].is_string()) return Bad(path, absl::StrCat(who, ": dtype is not a string"));
  const std::string dtype = e["dtype"].get<std::string>();
  absl::StatusOr<StDtype> dt = ParseStDtype(dtype);
  if (!dt.ok()) {
    return absl::UnimplementedError(absl::StrCat(
        path, ": ", dtype, " tensor '", name, "' is not supported (", dt.status().message(), ")"));
  }
  t->name = name;
  t->dtype = *dt;
  const nlohmann::json& shape = e["shape"];
  if (!shape.is_array()) return Bad(path, absl::StrCat(who, ": shape is not an array"));
  uint64_t numel = 1;
  bool overflow = false;
  for (const nlohmann::json& d : shape) {
    if (!d.is_number_unsigned()) {
      return Bad(path, absl::StrCat(who, ": shape ", d.dump(), " is not a non-negative integer"));
    }
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) overflow = true;
    t->shape.push_back(static_cast<int64_t>(v));
    if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / v) overflow = true;
    numel *= v;
  }
  const uint64_t esize = StDtypeSize(t->dtype);
  if (overflow || numel > std::numeric_limits<uint64_t>::max() / esize) {
    return Bad(path, absl::StrCat(who, ": shape ", shape.dump(), " overflows 64 bits"));
  }
  const nlohmann::json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned()) {
    return Bad(path, absl::StrCat(who, ": data_offsets must be two non-negative integers, got ",
                                  off.dump()));
  }
  const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
  if (b > en) {
    return Bad(path, absl::StrCat(who, ": data_offsets [", b, ", ", en, "] are reversed"));
  }
  if (en > data_size) {
    return Bad(path,
               absl::StrCat(who, ": data_offsets [", b, ", ", en, "] end past the data section (",
                            data_size, " bytes); the file may be truncated"));
  }
  if (en - b != numel * esize) {
    return Bad(path, absl::StrCat(who, ": byte count ", en - b, " does not match shape ",
                                  ShapeText(t->shape), " x ", esize, " bytes = ", numel * esize));
  }
  t->nbytes = static_cast<size_t>(en - b);
  *begin = b;
  return absl::OkStatus();
}

}  // namespace

std::string_view StDtypeName(StDtype t) {
  for (const DtypeRow& r : kDtypes) {
    if (r.t == t) return r.name;
  }
  return "?";
}

size_t StDtypeSize(StDtype t) {
  for (const DtypeRow& r : kDtypes) {
    if (r.t == t) return r.size;
  }
  return 0;
}

absl::StatusOr<StDtype> ParseStDtype(std::string_view name) {
  for (const DtypeRow& r : kDtypes) {
    if (r.name == name) return r.t;
  }
  return absl::UnimplementedError(absl::StrCat(
      "dtype '", Sv(name), "' is not supported; supported: F32, F16, BF16, I32, I8, U8"));
}

int64_t StTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int32_t StReadI32(const StTensor& t, int64_t i) {
  int32_t v;
  std::memcpy(&v, t.data + i * 4, 4);
  return v;
}

float StReadFloat(const StTensor& t, int64_t i) {
  switch (t.dtype) {
    case StDtype::kF32: {
      float v;
      std::memcpy(&v, t.data + i * 4, 4);
      return v;
    }
    case StDtype::kF16:
    case StDtype::kBF16: {
      uint16_t h;
      std::memcpy(&h, t.data + i * 2, 2);
      return t.dtype == StDtype::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
    }
    default:
      return 0.0f;
  }
}

absl::StatusOr<std::vector<float>> StToFloats(const StTensor& t) {
  if (t.dtype != StDtype::kF32 && t.dtype != StDtype::kF16 && t.dtype != StDtype::kBF16) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' is ",
                                                   Sv(StDtypeName(t.dtype)),
                                                   ", not a float type (F32, F16, BF16)"));
  }
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = StReadFloat(t, static_cast<int64_t>(i));
  return out;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> f = MappedFile::Open(path);
  if (!f.ok()) return f.status();
  return FromMapped(*std::move(f));
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromMapped(
    std::unique_ptr<MappedFile> file) {
  const std::string path = file->path();
  const size_t size = file->size();
  if (size < 8) {
    return Bad(path,
               absl::StrCat("file is ", size, " bytes, shorter than the 8-byte header length"));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file->data()[i];
  if (n > kMaxSafetensorsHeaderBytes) {
    return Bad(path, absl::StrCat("header length ", n, " exceeds the limit of ",
                                  kMaxSafetensorsHeaderBytes, " bytes"));
  }
  if (n > size - 8) {
    return Bad(path, absl::StrCat("header length ", n, " runs past the end of the file (", size,
                                  " bytes)"));
  }
  const std::string_view text(reinterpret_cast<const char*>(file->data()) + 8, n);
  absl::StatusOr<nlohmann::json> doc = ParseJsonStrict(text, absl::StrCat(path, " header"));
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) return Bad(path, "header is not a JSON object");

  std::unique_ptr<SafetensorsFile> st(new SafetensorsFile());
  st->data_offset_ = 8 + n;
  const size_t data_size = size - st->data_offset_;
  const uint8_t* data = file->data() + st->data_offset_;
  std::vector<std::pair<uint64_t, StTensor>> entries;
  for (const auto& [key, value] : doc->items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;
      if (!value.is_object()) return Bad(path, "__metadata__ is not a JSON object");
      for (const auto& [mk, mv] : value.items()) {
        st->metadata_[mk] = mv.is_string() ? mv.get<std::string>() : mv.dump();
      }
      continue;
    }
    StTensor t;
    uint64_t begin = 0;
    if (absl::Status s = ParseEntry(path, key, value, data_size, &t, &begin); !s.ok()) return s;
    t.data = data + begin;
    entries.emplace_back(begin, std::move(t));
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < entries.size(); ++i) {
    const auto& prev = entries[i - 1];
    const auto& cur = entries[i];
    if (cur.first < prev.first + prev.second.nbytes) {
      return Bad(path,
                 absl::StrCat("tensors '", prev.second.name, "' [", prev.first, ", ",
                              prev.first + prev.second.nbytes, ") and '", cur.second.name, "' [",
                              cur.first, ", ", cur.first + cur.second.nbytes, ") overlap"));
    }
  }
  for (auto& [begin, t] : entries) {
    st->index_[t.name] = st->tensors_.size();
    st->tensors_.push_back(std::move(t));
  }
  st->file_ = std::move(file);
  return st;
}

const StTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace pinfer
