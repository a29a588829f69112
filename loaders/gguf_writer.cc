// GgufWriter: header, metadata and tensor infos are encoded in memory (they are small); tensor
// data is streamed one tensor at a time, each at an aligned offset of the data section.
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"
#include "loaders/gguf.h"

namespace pinfer {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the GGUF writer assumes a little-endian host");

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));
}

void PutString(std::vector<uint8_t>* out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

// Encodes a value's payload (not its type id). Errors name the key.
absl::Status PutValue(std::vector<uint8_t>* out, const GgufValue& v, const std::string& key,
                      int depth) {
  switch (v.type) {
    case GgufType::kU8:
      Put<uint8_t>(out, static_cast<uint8_t>(v.u));
      break;
    case GgufType::kI8:
      Put<int8_t>(out, static_cast<int8_t>(v.i));
      break;
    case GgufType::kU16:
      Put<uint16_t>(out, static_cast<uint16_t>(v.u));
      break;
    case GgufType::kI16:
      Put<int16_t>(out, static_cast<int16_t>(v.i));
      break;
    case GgufType::kU32:
      Put<uint32_t>(out, static_cast<uint32_t>(v.u));
      break;
    case GgufType::kI32:
      Put<int32_t>(out, static_cast<int32_t>(v.i));
      break;
    case GgufType::kU64:
      Put<uint64_t>(out, v.u);
      break;
    case GgufType::kI64:
      Put<int64_t>(out, v.i);
      break;
    case GgufType::kF32:
      Put<float>(out, static_cast<float>(v.f));
      break;
    case GgufType::kF64:
      Put<double>(out, v.f);
      break;
    case GgufType::kBool:
      Put<uint8_t>(out, v.u != 0 ? 1 : 0);
      break;
    case GgufType::kString:
      PutString(out, v.s);
      break;
    case GgufType::kArray:
      if (depth >= kGgufMaxArrayDepth) {
        return absl::InvalidArgumentError(absl::StrCat("metadata key '", key, "': arrays nest ",
                                                       "deeper than ", kGgufMaxArrayDepth,
                                                       " levels, which readers refuse"));
      }
      Put<uint32_t>(out, static_cast<uint32_t>(v.elem_type));
      Put<uint64_t>(out, v.arr.size());
      for (size_t k = 0; k < v.arr.size(); ++k) {
        if (v.arr[k].type != v.elem_type) {
          return absl::InvalidArgumentError(absl::StrCat("metadata key '", key, "': array element ",
                                                         k, " is ", Sv(GgufTypeName(v.arr[k].type)),
                                                         " but the array holds ",
                                                         Sv(GgufTypeName(v.elem_type))));
        }
        if (auto s = PutValue(out, v.arr[k], key, depth + 1); !s.ok()) return s;
      }
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata key '", key, "' has an unknown value type ", static_cast<uint32_t>(v.type)));
  }
  return absl::OkStatus();
}

uint64_t AlignUp(uint64_t n, uint64_t a) { return n + (a - n % a) % a; }

}  // namespace

GgufWriter::GgufWriter(uint32_t version) : version_(version) {}

void GgufWriter::Set(std::string key, GgufValue value) {
  for (GgufKV& kv : kv_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  kv_.push_back(GgufKV{std::move(key), std::move(value)});
}

void GgufWriter::SetStringArray(std::string key, const std::vector<std::string>& v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (const std::string& s : v) elems.push_back(GgufValue::Str(s));
  Set(std::move(key), GgufValue::Array(GgufType::kString, std::move(elems)));
}

void GgufWriter::SetF32Array(std::string key, const std::vector<float>& v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (float x : v) elems.push_back(GgufValue::F32(x));
  Set(std::move(key), GgufValue::Array(GgufType::kF32, std::move(elems)));
}

void GgufWriter::SetI32Array(std::string key, const std::vector<int32_t>& v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (int32_t x : v) elems.push_back(GgufValue::I32(x));
  Set(std::move(key), GgufValue::Array(GgufType::kI32, std::move(elems)));
}

absl::StatusOr<uint64_t> GgufWriter::CheckTensor(const std::string& name, GgmlType type,
                                                 const std::vector<int64_t>& dims) const {
  const GgmlTypeInfo* info = FindGgmlTypeInfo(static_cast<uint32_t>(type));
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': ", parts...));
  };
  if (info == nullptr) return bad("unknown tensor type id ", static_cast<uint32_t>(type));
  if (!info->supported) return bad("type ", Sv(info->name), " cannot be read back by this engine");
  if (dims.empty() || dims.size() > 4) return bad(dims.size(), " dimensions; GGUF allows 1..4");
  int64_t n = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] <= 0) return bad("dimension ", d, " is ", dims[d], "; dimensions must be > 0");
    if (__builtin_mul_overflow(n, dims[d], &n)) return bad("element count overflows 64 bits");
  }
  if (dims[0] % info->block_size != 0) {
    return bad("row length ", dims[0], " is not a multiple of ", Sv(info->name), "'s block size ",
               info->block_size);
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n / info->block_size),
                             static_cast<uint64_t>(info->block_bytes), &nbytes)) {
    return bad("byte size overflows 64 bits");
  }
  for (const Tensor& t : tensors_) {
    if (t.name == name) return bad("duplicate tensor name");
  }
  return nbytes;
}

absl::Status GgufWriter::AddTensor(std::string name, GgmlType type, std::vector<int64_t> dims,
                                   std::vector<uint8_t> bytes) {
  absl::StatusOr<uint64_t> nbytes = CheckTensor(name, type, dims);
  if (!nbytes.ok()) return nbytes.status();
  if (bytes.size() != *nbytes) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': ", bytes.size(),
                                                   " data bytes given; its type and dims need ",
                                                   *nbytes));
  }
  tensors_.push_back(Tensor{std::move(name), type, std::move(dims), *nbytes, std::move(bytes), {}});
  return absl::OkStatus();
}

absl::Status GgufWriter::AddTensor(std::string name, GgmlType type, std::vector<int64_t> dims,
                                   Fill fill) {
  absl::StatusOr<uint64_t> nbytes = CheckTensor(name, type, dims);
  if (!nbytes.ok()) return nbytes.status();
  if (!fill) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': empty Fill callback"));
  }
  tensors_.push_back(Tensor{std::move(name), type, std::move(dims), *nbytes, {}, std::move(fill)});
  return absl::OkStatus();
}

namespace {

// Encodes everything before the data section (without the final padding) and the tensors'
// data offsets; checks version, alignment and metadata.
absl::Status EncodeHeader(uint32_t version, const std::vector<GgufKV>& kv, uint64_t n_tensors,
                          std::vector<uint8_t>* out, uint64_t* alignment) {
  if (version != 2 && version != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF version ", version, " cannot be written (only 2 and 3)"));
  }
  *alignment = 32;
  for (const GgufKV& e : kv) {
    if (e.key != "general.alignment") continue;
    if (e.value.type != GgufType::kU32 || e.value.u == 0 || !std::has_single_bit(e.value.u) ||
        e.value.u > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(
          "general.alignment must be a u32 holding a non-zero power of two");
    }
    *alignment = e.value.u;
  }
  Put<uint32_t>(out, 0x46554747);  // "GGUF" read as a little-endian u32
  Put<uint32_t>(out, version);
  Put<uint64_t>(out, n_tensors);
  Put<uint64_t>(out, kv.size());
  for (const GgufKV& e : kv) {
    PutString(out, e.key);
    Put<uint32_t>(out, static_cast<uint32_t>(e.value.type));
    if (auto s = PutValue(out, e.value, e.key, 0); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> GgufWriter::WriteToBytes() const {
  std::vector<uint8_t> out;
  auto sink = [&out](const uint8_t* p, size_t n) {
    out.insert(out.end(), p, p + n);
    return absl::OkStatus();
  };
  if (auto s = WriteTo(sink); !s.ok()) return s;
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  const std::string partial = path + ".partial";
  std::FILE* f = std::fopen(partial.c_str(), "wb");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create '", partial, "': ", std::strerror(errno)));
  }
  std::vector<char> buffer(1 << 20);
  std::setvbuf(f, buffer.data(), _IOFBF, buffer.size());
  auto sink = [f, &partial](const uint8_t* p, size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, f) != n) {
      return absl::InternalError(
          absl::StrCat("writing '", partial, "' failed: ", std::strerror(errno)));
    }
    return absl::OkStatus();
  };
  absl::Status s = WriteTo(sink);
  if (std::fclose(f) != 0 && s.ok()) {
    s = absl::InternalError(absl::StrCat("closing '", partial, "' failed: ", std::strerror(errno)));
  }
  if (s.ok() && std::rename(partial.c_str(), path.c_str()) != 0) {
    s = absl::InternalError(
        absl::StrCat("cannot rename '", partial, "' to '", path, "': ", std::strerror(errno)));
  }
  if (!s.ok()) std::remove(partial.c_str());
  return s;
}

absl::Status GgufWriter::WriteTo(const ByteSink& sink) const {
  std::vector<uint8_t> head;
  uint64_t alignment = 32;
  if (auto s = EncodeHeader(version_, kv_, tensors_.size(), &head, &alignment); !s.ok()) return s;
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&head, t.name);
    Put<uint32_t>(&head, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) Put<uint64_t>(&head, static_cast<uint64_t>(d));
    Put<uint32_t>(&head, static_cast<uint32_t>(t.type));
    offset = AlignUp(offset, alignment);
    Put<uint64_t>(&head, offset);
    offset += t.nbytes;
  }
  head.resize(AlignUp(head.size(), alignment), 0);
  if (auto s = sink(head.data(), head.size()); !s.ok()) return s;

  const std::vector<uint8_t> zeros(alignment, 0);
  std::vector<uint8_t> scratch;  // one tensor at a time, for Fill callbacks
  uint64_t written = 0;
  for (const Tensor& t : tensors_) {
    const uint64_t pad = AlignUp(written, alignment) - written;
    if (auto s = sink(zeros.data(), pad); !s.ok()) return s;
    written += pad;
    const uint8_t* src = t.bytes.data();
    if (t.fill) {
      scratch.assign(t.nbytes, 0);
      t.fill(scratch.data(), scratch.size());
      src = scratch.data();
    }
    if (auto s = sink(src, t.nbytes); !s.ok()) return s;
    written += t.nbytes;
  }
  return absl::OkStatus();
}

}  // namespace pinfer
