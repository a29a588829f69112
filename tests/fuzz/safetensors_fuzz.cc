// libFuzzer target for the safetensors reader: any byte string must open to ok or an error;
// on ok, every tensor's bytes are read through the element readers the loaders use (ASan
// checks that they stay inside the file) and the metadata is walked.
// Built with -DPAGEDINFER_FUZZ=ON and clang as a fuzzer, and in every build as a replay test
// of its seed corpus (tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "loaders/mapped_file.h"
#include "loaders/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<std::unique_ptr<pinfer::SafetensorsFile>> f = pinfer::SafetensorsFile::FromMapped(
      pinfer::MappedFile::FromBytes(std::vector<uint8_t>(data, data + size)));
  if (!f.ok()) return 0;
  volatile uint64_t sink = (*f)->data_offset();
  for (const auto& [k, v] : (*f)->metadata()) sink = sink + k.size() + v.size();
  for (const pinfer::StTensor& t : (*f)->tensors()) {
    if ((*f)->Find(t.name) != &t) __builtin_trap();  // the index must name every tensor
    for (size_t k = 0; k < t.nbytes; ++k) sink = sink + t.data[k];
    const int64_t n = t.numel();
    if (t.dtype == pinfer::StDtype::kI32) {
      for (int64_t i = 0; i < n; ++i) sink = sink + static_cast<uint32_t>(pinfer::StReadI32(t, i));
    }
    absl::StatusOr<std::vector<float>> floats = pinfer::StToFloats(t);
    if (floats.ok() && static_cast<int64_t>(floats->size()) != n) __builtin_trap();
  }
  return 0;
}
