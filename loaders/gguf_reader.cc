// GgufFile: parses and validates a GGUF v2/v3 image (header, metadata, tensor infos, data
// layout). Every count, length and offset is checked against the bytes that remain before
// it is used; errors name the problem and its byte offset.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"
#include "loaders/gguf.h"

namespace pinfer {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

constexpr uint64_t kMinKvBytes = 8 + 4 + 1;  // key length, value type, smallest value
constexpr uint64_t kMinTensorInfoBytes =
    8 + 4 + 8 + 4 + 8;  // name len, n_dims, 1 dim, type, offset
constexpr uint32_t kMaxDims = 4;

// On-disk bytes of one element of type t in an array (the smallest, for strings and arrays);
// 0 for ids that are not value types.
uint64_t MinElementBytes(uint32_t t) {
  switch (static_cast<GgufType>(t)) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    case GgufType::kString:
      return 8;
    case GgufType::kArray:
      return 4 + 8;
  }
  return 0;
}

std::string SupportedTypeNames() {
  std::string out;
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlTypeInfo* info = FindGgmlTypeInfo(id);
    if (info != nullptr && info->supported) {
      absl::StrAppend(&out, out.empty() ? "" : ", ", Sv(info->name));
    }
  }
  return out;
}

struct PendingTensor {
  uint64_t offset_field_pos = 0;  // byte position of the tensor's offset field
};

class Parser {
 public:
  Parser(const uint8_t* data, size_t size, std::string path)
      : p_(data), size_(size), path_(std::move(path)) {}

  absl::Status Run(uint32_t* version, uint64_t* alignment, uint64_t* data_offset,
                   std::vector<GgufKV>* kv, std::vector<GgufTensorInfo>* tensors);

 private:
  absl::Status Fail(std::string_view msg) const {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF ", path_, ": ", Sv(ctx_), ctx_.empty() ? "" : ": ", Sv(msg)));
  }
  std::string PastEnd() const {
    return absl::StrCat("runs past the end of the file (", size_, " bytes)");
  }
  uint64_t Remaining() const { return size_ - pos_; }

  absl::Status Need(uint64_t n, std::string_view what) const {
    if (n > Remaining()) {
      return Fail(absl::StrCat(Sv(what), " (", n, " bytes) at byte ", pos_, " ", PastEnd()));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Read(std::string_view what, T* out) {
    if (absl::Status s = Need(sizeof(T), what); !s.ok()) return s;
    std::memcpy(out, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  // Reads a T and widens it into *field.
  template <typename T, typename Field>
  absl::Status ReadAs(std::string_view what, Field* field) {
    T v;
    if (absl::Status s = Read(what, &v); !s.ok()) return s;
    *field = static_cast<Field>(v);
    return absl::OkStatus();
  }

  absl::Status ReadString(std::string_view what, std::string* out);
  absl::Status ReadValue(uint32_t type, uint64_t type_pos, int depth, GgufValue* out);
  absl::Status ReadHeader(uint32_t* version, uint64_t* n_tensors, uint64_t* n_kv);
  absl::Status ReadTensorInfo(GgufTensorInfo* t, PendingTensor* pending);
  absl::Status ReadAlignment(const std::vector<GgufKV>& kv, uint64_t* alignment);
  absl::Status CheckLayout(uint64_t alignment, uint64_t data_offset,
                           const std::vector<GgufTensorInfo>& tensors,
                           const std::vector<PendingTensor>& pending);

  const uint8_t* p_;
  uint64_t size_;
  std::string path_;
  uint64_t pos_ = 0;
  std::string ctx_;  // "metadata key 'x'", "tensor 'y'": prefixes messages
  uint64_t array_elements_ = 0;
  std::unordered_map<std::string, uint64_t> value_pos_;  // key -> byte of its value
};

absl::Status Parser::ReadString(std::string_view what, std::string* out) {
  const uint64_t len_pos = pos_;
  uint64_t len = 0;
  if (absl::Status s = Read(absl::StrCat(Sv(what), " length"), &len); !s.ok()) return s;
  if (len > Remaining()) {
    return Fail(absl::StrCat(Sv(what), " length ", len, " at byte ", len_pos, " ", PastEnd()));
  }
  out->assign(reinterpret_cast<const char*>(p_ + pos_), len);
  pos_ += len;
  return absl::OkStatus();
}

absl::Status Parser::ReadValue(uint32_t type, uint64_t type_pos, int depth, GgufValue* out) {
  if (MinElementBytes(type) == 0) {
    return Fail(absl::StrCat("unknown metadata value type ", type, " at byte ", type_pos,
                             " (known types are 0..12)"));
  }
  out->type = static_cast<GgufType>(type);
  switch (out->type) {
    case GgufType::kU8:
      return ReadAs<uint8_t>("u8 value", &out->u);
    case GgufType::kU16:
      return ReadAs<uint16_t>("u16 value", &out->u);
    case GgufType::kU32:
      return ReadAs<uint32_t>("u32 value", &out->u);
    case GgufType::kU64:
      return ReadAs<uint64_t>("u64 value", &out->u);
    case GgufType::kI8:
      return ReadAs<int8_t>("i8 value", &out->i);
    case GgufType::kI16:
      return ReadAs<int16_t>("i16 value", &out->i);
    case GgufType::kI32:
      return ReadAs<int32_t>("i32 value", &out->i);
    case GgufType::kI64:
      return ReadAs<int64_t>("i64 value", &out->i);
    case GgufType::kF32:
      return ReadAs<float>("f32 value", &out->f);
    case GgufType::kF64:
      return ReadAs<double>("f64 value", &out->f);
    case GgufType::kBool: {
      const uint64_t at = pos_;
      uint8_t v;
      if (auto s = Read("bool value", &v); !s.ok()) return s;
      if (v > 1)
        return Fail(absl::StrCat("bool value ", v, " at byte ", at, " is neither 0 nor 1"));
      out->u = v;
      break;
    }
    case GgufType::kString:
      return ReadString("string", &out->s);
    case GgufType::kArray: {
      if (depth >= kGgufMaxArrayDepth) {
        return Fail(absl::StrCat("arrays nested deeper than ", kGgufMaxArrayDepth,
                                 " levels at byte ", type_pos));
      }
      const uint64_t elem_pos = pos_;
      uint32_t elem = 0;
      if (auto s = Read("array element type", &elem); !s.ok()) return s;
      const uint64_t min_bytes = MinElementBytes(elem);
      if (min_bytes == 0) {
        return Fail(absl::StrCat("unknown array element type ", elem, " at byte ", elem_pos,
                                 " (known types are 0..12)"));
      }
      out->elem_type = static_cast<GgufType>(elem);
      const uint64_t count_pos = pos_;
      uint64_t count = 0;
      if (auto s = Read("array length", &count); !s.ok()) return s;
      if (count > Remaining() / min_bytes) {
        return Fail(absl::StrCat("array length ", count, " of ", Sv(GgufTypeName(out->elem_type)),
                                 " at byte ", count_pos, " (at least ", min_bytes, " bytes each) ",
                                 PastEnd()));
      }
      if (count > kGgufMaxArrayElements - array_elements_) {
        return Fail(absl::StrCat("array length ", count, " at byte ", count_pos,
                                 " brings the file's metadata array elements past the limit of ",
                                 kGgufMaxArrayElements));
      }
      array_elements_ += count;
      out->arr.resize(count);
      for (GgufValue& e : out->arr) {
        if (auto s = ReadValue(elem, elem_pos, depth + 1, &e); !s.ok()) return s;
      }
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status Parser::ReadHeader(uint32_t* version, uint64_t* n_tensors, uint64_t* n_kv) {
  if (size_ < 4 || std::memcmp(p_, "GGUF", 4) != 0) {
    std::string seen;
    for (uint64_t k = 0; k < std::min<uint64_t>(size_, 4); ++k) {
      const char c = static_cast<char>(p_[k]);
      seen += (c >= 0x20 && c < 0x7f) ? std::string(1, c) : absl::StrCat("\\x", absl::Hex(p_[k]));
    }
    return Fail(
        absl::StrCat("bad magic '", seen, "' at byte 0: not a GGUF file (expected 'GGUF')"));
  }
  pos_ = 4;
  if (auto s = Read("version", version); !s.ok()) return s;
  if (*version == 1) {
    return Fail(
        "GGUF version 1 at byte 4 is not supported (only versions 2 and 3): "
        "re-convert the model with a current llama.cpp convert script");
  }
  if (*version != 2 && *version != 3) {
    const uint32_t swapped = __builtin_bswap32(*version);
    if (swapped == 2 || swapped == 3) {
      return Fail(absl::StrCat("big-endian GGUF (version ", swapped,
                               " byte-swapped at byte 4) is not supported"));
    }
    return Fail(absl::StrCat("unsupported GGUF version ", *version,
                             " at byte 4 (only versions 2 and 3 are read)"));
  }
  if (auto s = Read("tensor count", n_tensors); !s.ok()) return s;
  if (auto s = Read("metadata count", n_kv); !s.ok()) return s;
  const uint64_t rest = Remaining();
  if (*n_tensors > rest / kMinTensorInfoBytes) {
    return Fail(absl::StrCat("tensor count ", *n_tensors, " at byte 8 is more than the remaining ",
                             rest, " bytes could hold (", kMinTensorInfoBytes,
                             " bytes per tensor info at least)"));
  }
  if (*n_kv > rest / kMinKvBytes) {
    return Fail(absl::StrCat("metadata count ", *n_kv, " at byte 16 is more than the remaining ",
                             rest, " bytes could hold (", kMinKvBytes,
                             " bytes per entry at least)"));
  }
  if (*n_tensors * kMinTensorInfoBytes + *n_kv * kMinKvBytes > rest) {
    return Fail(absl::StrCat(*n_tensors, " tensors and ", *n_kv,
                             " metadata entries (counts at bytes 8 and 16) cannot fit in the "
                             "remaining ",
                             rest, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status Parser::ReadAlignment(const std::vector<GgufKV>& kv, uint64_t* alignment) {
  *alignment = 32;
  for (const GgufKV& e : kv) {
    if (e.key != "general.alignment") continue;
    const uint64_t at = value_pos_[e.key];
    if (e.value.type != GgufType::kU32) {
      return Fail(absl::StrCat("general.alignment at byte ", at, " is ",
                               Sv(GgufTypeName(e.value.type)), "; it must be a u32"));
    }
    if (e.value.u == 0 || !std::has_single_bit(e.value.u)) {
      return Fail(absl::StrCat("general.alignment ", e.value.u, " at byte ", at,
                               " is not a non-zero power of two"));
    }
    *alignment = e.value.u;
  }
  return absl::OkStatus();
}

absl::Status Parser::ReadTensorInfo(GgufTensorInfo* t, PendingTensor* pending) {
  const uint64_t dims_pos = pos_;
  uint32_t n_dims = 0;
  if (auto s = Read("dimension count", &n_dims); !s.ok()) return s;
  if (n_dims < 1 || n_dims > kMaxDims) {
    return Fail(absl::StrCat("dimension count ", n_dims, " at byte ", dims_pos, " is outside 1..",
                             kMaxDims));
  }
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t at = pos_;
    uint64_t dim = 0;
    if (auto s = Read("dimension", &dim); !s.ok()) return s;
    if (dim == 0) return Fail(absl::StrCat("dimension ", d, " at byte ", at, " is 0"));
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(n_elements, static_cast<int64_t>(dim), &n_elements)) {
      return Fail(absl::StrCat("dimension ", d, " (", dim, ") at byte ", at,
                               " makes the element count overflow 64 bits"));
    }
    t->dims.push_back(static_cast<int64_t>(dim));
  }
  const uint64_t type_pos = pos_;
  uint32_t type_id = 0;
  if (auto s = Read("tensor type", &type_id); !s.ok()) return s;
  const GgmlTypeInfo* info = FindGgmlTypeInfo(type_id);
  if (info == nullptr) {
    return Fail(absl::StrCat("unknown tensor type id ", type_id, " at byte ", type_pos));
  }
  if (!info->supported) {
    return Fail(absl::StrCat("tensor type ", Sv(info->name), " (id ", type_id, ") at byte ",
                             type_pos, " is not supported by this engine; supported types: ",
                             SupportedTypeNames(), " (re-quantize the model to one of them)"));
  }
  if (t->dims[0] % info->block_size != 0) {
    return Fail(absl::StrCat("row length ", t->dims[0], " at byte ", dims_pos + 4,
                             " is not a multiple of ", Sv(info->name), "'s block size ",
                             info->block_size));
  }
  const uint64_t n_blocks = static_cast<uint64_t>(n_elements / info->block_size);
  if (__builtin_mul_overflow(n_blocks, static_cast<uint64_t>(info->block_bytes), &t->nbytes)) {
    return Fail(absl::StrCat("byte size of ", n_elements, " ", Sv(info->name),
                             " elements overflows 64 bits (dimensions at byte ", dims_pos, ")"));
  }
  t->type = static_cast<GgmlType>(type_id);
  pending->offset_field_pos = pos_;
  return Read("tensor data offset", &t->offset);
}

absl::Status Parser::CheckLayout(uint64_t alignment, uint64_t data_offset,
                                 const std::vector<GgufTensorInfo>& tensors,
                                 const std::vector<PendingTensor>& pending) {
  const uint64_t data_bytes = size_ - data_offset;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const GgufTensorInfo& t = tensors[k];
    ctx_ = absl::StrCat("tensor '", t.name, "'");
    const uint64_t at = pending[k].offset_field_pos;
    if (t.offset % alignment != 0) {
      return Fail(absl::StrCat("data offset ", t.offset, " at byte ", at,
                               " is not a multiple of the alignment ", alignment));
    }
    if (t.offset > data_bytes || t.nbytes > data_bytes - t.offset) {
      return Fail(absl::StrCat("data (", t.nbytes, " bytes at data offset ", t.offset,
                               ", offset field at byte ", at, ", data section at byte ",
                               data_offset, ") ", PastEnd()));
    }
  }
  std::vector<size_t> order(tensors.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensorInfo& prev = tensors[order[k - 1]];
    const GgufTensorInfo& cur = tensors[order[k]];
    if (prev.offset + prev.nbytes > cur.offset) {
      ctx_ = absl::StrCat("tensor '", cur.name, "'");
      return Fail(absl::StrCat("data at offset ", cur.offset, " (offset field at byte ",
                               pending[order[k]].offset_field_pos, ") overlaps tensor '", prev.name,
                               "', which covers data bytes [", prev.offset, ", ",
                               prev.offset + prev.nbytes, ")"));
    }
  }
  ctx_.clear();
  return absl::OkStatus();
}

absl::Status Parser::Run(uint32_t* version, uint64_t* alignment, uint64_t* data_offset,
                         std::vector<GgufKV>* kv, std::vector<GgufTensorInfo>* tensors) {
  uint64_t n_tensors = 0, n_kv = 0;
  if (auto s = ReadHeader(version, &n_tensors, &n_kv); !s.ok()) return s;

  kv->reserve(n_kv);
  std::unordered_map<std::string, uint64_t> key_pos;
  for (uint64_t k = 0; k < n_kv; ++k) {
    ctx_ = absl::StrCat("metadata entry ", k);
    const uint64_t at = pos_;
    GgufKV e;
    if (auto s = ReadString("key", &e.key); !s.ok()) return s;
    if (auto [it, fresh] = key_pos.emplace(e.key, at); !fresh) {
      return Fail(absl::StrCat("duplicate metadata key '", e.key, "' at byte ", at,
                               " (first at byte ", it->second, ")"));
    }
    ctx_ = absl::StrCat("metadata key '", e.key, "'");
    const uint64_t type_pos = pos_;
    uint32_t type = 0;
    if (auto s = Read("value type", &type); !s.ok()) return s;
    value_pos_[e.key] = pos_;
    if (auto s = ReadValue(type, type_pos, 0, &e.value); !s.ok()) return s;
    kv->push_back(std::move(e));
  }
  ctx_.clear();
  if (auto s = ReadAlignment(*kv, alignment); !s.ok()) return s;

  tensors->reserve(n_tensors);
  std::vector<PendingTensor> pending(n_tensors);
  std::unordered_map<std::string, uint64_t> name_pos;
  for (uint64_t k = 0; k < n_tensors; ++k) {
    ctx_ = absl::StrCat("tensor info ", k);
    const uint64_t at = pos_;
    GgufTensorInfo t;
    if (auto s = ReadString("tensor name", &t.name); !s.ok()) return s;
    if (auto [it, fresh] = name_pos.emplace(t.name, at); !fresh) {
      return Fail(absl::StrCat("duplicate tensor name '", t.name, "' at byte ", at,
                               " (first at byte ", it->second, ")"));
    }
    ctx_ = absl::StrCat("tensor '", t.name, "'");
    if (auto s = ReadTensorInfo(&t, &pending[k]); !s.ok()) return s;
    tensors->push_back(std::move(t));
  }
  ctx_.clear();

  const uint64_t header_end = pos_;
  *data_offset = header_end + (*alignment - header_end % *alignment) % *alignment;
  if (*data_offset > size_) {
    return Fail(absl::StrCat("data section start ", *data_offset, " (header end ", header_end,
                             " rounded up to the alignment ", *alignment, ") ", PastEnd()));
  }
  return CheckLayout(*alignment, *data_offset, *tensors, pending);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  return Parse(*std::move(file));
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBytes(std::vector<uint8_t> bytes) {
  return Parse(MappedFile::FromBytes(std::move(bytes)));
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(std::unique_ptr<MappedFile> file) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  Parser parser(file->data(), file->size(), file->path());
  if (absl::Status s =
          parser.Run(&f->version_, &f->alignment_, &f->data_offset_, &f->kv_, &f->tensors_);
      !s.ok()) {
    return s;
  }
  f->file_ = std::move(file);
  return f;
}

}  // namespace pinfer
