// Test helper: builds GGUF images byte by byte, so tests can write files the writer refuses
// (malformed headers, hostile counts). Little-endian, like the format.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace pinfer::testing {

class GgufBytes {
 public:
  std::vector<uint8_t> bytes;

  GgufBytes& U8(uint8_t v) { return Raw(&v, 1); }
  GgufBytes& U32(uint32_t v) { return Raw(&v, 4); }
  GgufBytes& U64(uint64_t v) { return Raw(&v, 8); }
  GgufBytes& F32(float v) { return Raw(&v, 4); }
  GgufBytes& Str(const std::string& s) {
    U64(s.size());
    return Raw(s.data(), s.size());
  }
  // magic "GGUF", version, tensor count, metadata count.
  GgufBytes& Header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    Raw("GGUF", 4);
    U32(version);
    U64(n_tensors);
    return U64(n_kv);
  }
  // key, type u32 (4), value.
  GgufBytes& KvU32(const std::string& key, uint32_t v) { return Str(key).U32(4).U32(v); }
  GgufBytes& KvStr(const std::string& key, const std::string& v) { return Str(key).U32(8).Str(v); }
  // name, n_dims, dims, type id, offset.
  GgufBytes& Tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                    uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) U64(d);
    return U32(type).U64(offset);
  }
  GgufBytes& PadTo(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
    return *this;
  }
  GgufBytes& Zeros(size_t n) {
    bytes.resize(bytes.size() + n, 0);
    return *this;
  }

 private:
  GgufBytes& Raw(const void* p, size_t n) {
    const size_t at = bytes.size();
    bytes.resize(at + n);
    if (n > 0) std::memcpy(bytes.data() + at, p, n);
    return *this;
  }
};

}  // namespace pinfer::testing
