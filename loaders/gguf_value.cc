// GgufValue factories, tensor-info arithmetic and GgufFile's typed metadata look-ups.
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"
#include "loaders/gguf.h"

namespace pinfer {
namespace {

GgufValue Unsigned(GgufType t, uint64_t v) {
  GgufValue out;
  out.type = t;
  out.u = v;
  return out;
}

GgufValue Signed(GgufType t, int64_t v) {
  GgufValue out;
  out.type = t;
  out.i = v;
  return out;
}

GgufValue Floating(GgufType t, double v) {
  GgufValue out;
  out.type = t;
  out.f = v;
  return out;
}

bool IsUnsigned(GgufType t) {
  return t == GgufType::kU8 || t == GgufType::kU16 || t == GgufType::kU32 || t == GgufType::kU64;
}
bool IsSigned(GgufType t) {
  return t == GgufType::kI8 || t == GgufType::kI16 || t == GgufType::kI32 || t == GgufType::kI64;
}
bool IsFloat(GgufType t) { return t == GgufType::kF32 || t == GgufType::kF64; }

// Describes a value's type for messages: "u32", "array of string".
std::string Describe(const GgufValue& v) {
  if (v.type != GgufType::kArray) return std::string(GgufTypeName(v.type));
  return absl::StrCat("array of ", Sv(GgufTypeName(v.elem_type)));
}

absl::Status WrongType(std::string_view key, const GgufValue& v, std::string_view wanted) {
  return absl::InvalidArgumentError(
      absl::StrCat("metadata key '", Sv(key), "' is ", Describe(v), ", not ", Sv(wanted)));
}

// An integer value as int64; nullopt-like failure through the bool.
bool AsInt(const GgufValue& v, int64_t* out) {
  if (IsSigned(v.type)) {
    *out = v.i;
    return true;
  }
  if (IsUnsigned(v.type) && v.u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    *out = static_cast<int64_t>(v.u);
    return true;
  }
  return false;
}

bool AsFloat(const GgufValue& v, double* out) {
  if (IsFloat(v.type)) {
    *out = v.f;
    return true;
  }
  if (IsSigned(v.type)) {
    *out = static_cast<double>(v.i);
    return true;
  }
  if (IsUnsigned(v.type)) {
    *out = static_cast<double>(v.u);
    return true;
  }
  return false;
}

}  // namespace

std::string_view GgufTypeName(GgufType t) {
  switch (t) {
    case GgufType::kU8:
      return "u8";
    case GgufType::kI8:
      return "i8";
    case GgufType::kU16:
      return "u16";
    case GgufType::kI16:
      return "i16";
    case GgufType::kU32:
      return "u32";
    case GgufType::kI32:
      return "i32";
    case GgufType::kF32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kU64:
      return "u64";
    case GgufType::kI64:
      return "i64";
    case GgufType::kF64:
      return "f64";
  }
  return "unknown";
}

GgufValue GgufValue::U8(uint8_t v) { return Unsigned(GgufType::kU8, v); }
GgufValue GgufValue::I8(int8_t v) { return Signed(GgufType::kI8, v); }
GgufValue GgufValue::U16(uint16_t v) { return Unsigned(GgufType::kU16, v); }
GgufValue GgufValue::I16(int16_t v) { return Signed(GgufType::kI16, v); }
GgufValue GgufValue::U32(uint32_t v) { return Unsigned(GgufType::kU32, v); }
GgufValue GgufValue::I32(int32_t v) { return Signed(GgufType::kI32, v); }
GgufValue GgufValue::U64(uint64_t v) { return Unsigned(GgufType::kU64, v); }
GgufValue GgufValue::I64(int64_t v) { return Signed(GgufType::kI64, v); }
GgufValue GgufValue::F32(float v) { return Floating(GgufType::kF32, v); }
GgufValue GgufValue::F64(double v) { return Floating(GgufType::kF64, v); }
GgufValue GgufValue::Bool(bool v) { return Unsigned(GgufType::kBool, v ? 1 : 0); }

GgufValue GgufValue::Str(std::string v) {
  GgufValue out;
  out.type = GgufType::kString;
  out.s = std::move(v);
  return out;
}

GgufValue GgufValue::Array(GgufType elem_type, std::vector<GgufValue> elems) {
  GgufValue out;
  out.type = GgufType::kArray;
  out.elem_type = elem_type;
  out.arr = std::move(elems);
  return out;
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // the reader and writer bound the product to int64
  return n;
}

int64_t GgufTensorInfo::n_rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  for (const GgufKV& kv : kv_) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

absl::StatusOr<const GgufValue*> Lookup(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("metadata key '", Sv(key), "' not found in GGUF ", f.path()));
  }
  return v;
}

}  // namespace

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Lookup(*this, key);
  if (!v.ok()) return v.status();
  int64_t out = 0;
  if (AsInt(**v, &out)) return out;
  if (IsUnsigned((*v)->type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata key '", Sv(key), "' value ", (*v)->u, " does not fit in an int64"));
  }
  return WrongType(key, **v, "an integer");
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Lookup(*this, key);
  if (!v.ok()) return v.status();
  double out = 0;
  if (AsFloat(**v, &out)) return out;
  return WrongType(key, **v, "a number");
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Lookup(*this, key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kBool) return WrongType(key, **v, "a bool");
  return (*v)->u != 0;
}

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Lookup(*this, key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kString) return WrongType(key, **v, "a string");
  return (*v)->s;
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Lookup(*this, key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kArray || (*v)->elem_type != GgufType::kString) {
    return WrongType(key, **v, "an array of string");
  }
  std::vector<std::string> out;
  out.reserve((*v)->arr.size());
  for (const GgufValue& e : (*v)->arr) out.push_back(e.s);
  return out;
}

absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Lookup(*this, key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kArray) return WrongType(key, **v, "an array of numbers");
  std::vector<double> out;
  out.reserve((*v)->arr.size());
  for (const GgufValue& e : (*v)->arr) {
    double x = 0;
    if (!AsFloat(e, &x)) return WrongType(key, **v, "an array of numbers");
    out.push_back(x);
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Lookup(*this, key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kArray) return WrongType(key, **v, "an array of integers");
  std::vector<int64_t> out;
  out.reserve((*v)->arr.size());
  for (size_t k = 0; k < (*v)->arr.size(); ++k) {
    int64_t x = 0;
    if (!AsInt((*v)->arr[k], &x)) {
      if (IsUnsigned((*v)->elem_type)) {
        return absl::InvalidArgumentError(
            absl::StrCat("metadata key '", Sv(key), "' element ", k, " does not fit in an int64"));
      }
      return WrongType(key, **v, "an array of integers");
    }
    out.push_back(x);
  }
  return out;
}

}  // namespace pinfer
