// libFuzzer target for the GGUF reader: any byte string must parse to ok or an error; on ok,
// every metadata value and every byte of every tensor's data is read (ASan checks bounds).
// Built with -DPAGEDINFER_FUZZ=ON and clang as a fuzzer, and in every build as a replay test
// of its seed corpus (tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "loaders/gguf.h"

namespace {

uint64_t Touch(const pinfer::GgufValue& v) {
  uint64_t h = static_cast<uint64_t>(v.type) + v.u + static_cast<uint64_t>(v.i) + v.s.size();
  for (char c : v.s) h += static_cast<unsigned char>(c);
  for (const pinfer::GgufValue& e : v.arr) h += Touch(e);
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<std::unique_ptr<pinfer::GgufFile>> f =
      pinfer::GgufFile::FromBytes(std::vector<uint8_t>(data, data + size));
  if (!f.ok()) return 0;
  volatile uint64_t sink = 0;
  for (const pinfer::GgufKV& kv : (*f)->metadata()) {
    sink = sink + kv.key.size() + Touch(kv.value);
    (void)(*f)->GetInt(kv.key);
    (void)(*f)->GetFloat(kv.key);
    (void)(*f)->GetStringArray(kv.key);
    (void)(*f)->GetIntArray(kv.key);
    (void)(*f)->GetFloatArray(kv.key);
  }
  for (const pinfer::GgufTensorInfo& t : (*f)->tensors()) {
    const uint8_t* p = (*f)->data(t);
    for (uint64_t k = 0; k < t.nbytes; ++k) sink = sink + p[k];
    sink = sink + static_cast<uint64_t>(t.n_elements() + t.n_rows());
  }
  return 0;
}
