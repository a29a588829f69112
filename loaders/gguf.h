// GGUF files (versions 2 and 3): a validating, memory-mapped reader and a writer.
//
// The reader checks every count, length, dimension, type and offset against the file size
// before use; a bad file is an error naming the problem and its byte offset, never a crash.
// Tensor data is not copied: data() points into the mapping, valid while the GgufFile lives.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "loaders/ggml_types.h"
#include "loaders/mapped_file.h"

namespace pinfer {

// The 13 metadata value types (on-disk ids).
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// One metadata value. Scalars are kept widened in the field matching their type; arrays
// (possibly nested) keep their element type and elements.
struct GgufValue {
  GgufType type = GgufType::kU32;
  uint64_t u = 0;                       // kU8, kU16, kU32, kU64, kBool (0/1)
  int64_t i = 0;                        // kI8, kI16, kI32, kI64
  double f = 0;                         // kF32, kF64
  std::string s;                        // kString
  GgufType elem_type = GgufType::kU32;  // kArray
  std::vector<GgufValue> arr;           // kArray

  static GgufValue U8(uint8_t v);
  static GgufValue I8(int8_t v);
  static GgufValue U16(uint16_t v);
  static GgufValue I16(int16_t v);
  static GgufValue U32(uint32_t v);
  static GgufValue I32(int32_t v);
  static GgufValue U64(uint64_t v);
  static GgufValue I64(int64_t v);
  static GgufValue F32(float v);
  static GgufValue F64(double v);
  static GgufValue Bool(bool v);
  static GgufValue Str(std::string v);
  static GgufValue Array(GgufType elem_type, std::vector<GgufValue> elems);
};

// "u8", "string", "array", ... for messages; "unknown" for ids outside the enum.
std::string_view GgufTypeName(GgufType t);

// Reader limits. Arrays nest at most kGgufMaxArrayDepth levels (an array of arrays is depth
// 2); all metadata arrays of a file together hold at most kGgufMaxArrayElements elements
// (4 Mi; the largest real vocabularies need about 1.5 M), so a hostile file cannot make the reader
// allocate far more memory than the file's own size suggests.
inline constexpr int kGgufMaxArrayDepth = 8;
inline constexpr uint64_t kGgufMaxArrayElements = uint64_t{1} << 22;

struct GgufKV {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the row length (fastest varying)
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;  // exact bytes of the tensor's data
  int64_t n_elements() const;
  int64_t n_rows() const;  // product of dims[1..]
};

class GgufFile {
 public:
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses a file image held in memory (tests and the fuzz target).
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBytes(std::vector<uint8_t> bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
  size_t file_size() const { return file_->size(); }
  const std::string& path() const { return file_->path(); }

  const std::vector<GgufKV>& metadata() const { return kv_; }
  const GgufValue* Find(std::string_view key) const;

  // Typed look-ups. NotFound when absent; InvalidArgument naming the key and the type found
  // when the type does not convert (integers convert between widths when the value fits).
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;  // f32, f64 or an integer
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  const uint8_t* data(const GgufTensorInfo& t) const {
    return file_->data() + data_offset_ + t.offset;
  }

 private:
  GgufFile() = default;
  static absl::StatusOr<std::unique_ptr<GgufFile>> Parse(std::unique_ptr<MappedFile> file);

  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKV> kv_;
  std::vector<GgufTensorInfo> tensors_;
};

// Writes GGUF v3 (or v2) files with any metadata and tensors. Tensor data is either owned
// bytes or a callback that fills the tensor's bytes at write time (for multi-GiB files).
class GgufWriter {
 public:
  // Called once per write with a zeroed buffer of the tensor's exact byte count; the writer
  // holds one such buffer at a time, so a file's tensors are never all in memory at once.
  using Fill = std::function<void(uint8_t* dst, size_t nbytes)>;

  explicit GgufWriter(uint32_t version = 3);

  void Set(std::string key, GgufValue value);  // replaces an existing key, keeps order
  void SetU32(std::string key, uint32_t v) { Set(std::move(key), GgufValue::U32(v)); }
  void SetF32(std::string key, float v) { Set(std::move(key), GgufValue::F32(v)); }
  void SetBool(std::string key, bool v) { Set(std::move(key), GgufValue::Bool(v)); }
  void SetString(std::string key, std::string v) {
    Set(std::move(key), GgufValue::Str(std::move(v)));
  }
  void SetStringArray(std::string key, const std::vector<std::string>& v);
  void SetF32Array(std::string key, const std::vector<float>& v);
  void SetI32Array(std::string key, const std::vector<int32_t>& v);

  // dims in ggml order (dims[0] = row length). Errors: row length not a multiple of the
  // type's block size, byte count not matching, duplicate name.
  absl::Status AddTensor(std::string name, GgmlType type, std::vector<int64_t> dims,
                         std::vector<uint8_t> bytes);
  absl::Status AddTensor(std::string name, GgmlType type, std::vector<int64_t> dims, Fill fill);

  // Uses general.alignment when set (a u32), else 32. Errors: version not 2 or 3, alignment
  // not a u32 power of two, array elements not of the array's element type. WriteFile
  // writes "<path>.partial" and renames it over path only when every byte was written.
  absl::Status WriteFile(const std::string& path) const;
  absl::StatusOr<std::vector<uint8_t>> WriteToBytes() const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    uint64_t nbytes;
    std::vector<uint8_t> bytes;
    Fill fill;
  };
  using ByteSink = std::function<absl::Status(const uint8_t* p, size_t n)>;
  // Checks a tensor's type, dims and name; returns its exact byte count.
  absl::StatusOr<uint64_t> CheckTensor(const std::string& name, GgmlType type,
                                       const std::vector<int64_t>& dims) const;
  absl::Status WriteTo(const ByteSink& sink) const;

  uint32_t version_;
  std::vector<GgufKV> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace pinfer
