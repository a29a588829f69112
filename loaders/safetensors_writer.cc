// SerializeSafetensors / WriteSafetensors.
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"
#include "loaders/safetensors.h"
#include "nlohmann/json.hpp"

namespace pinfer {

absl::StatusOr<std::vector<uint8_t>> SerializeSafetensors(
    const std::vector<StTensorData>& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) {
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const StTensorData& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") {
      return absl::InvalidArgumentError(absl::StrCat("cannot write a tensor named '", t.name, "'"));
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' is listed twice"));
    }
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' has dimension ", d));
      }
      numel *= static_cast<uint64_t>(d);
    }
    if (numel * StDtypeSize(t.dtype) != t.data.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name, "' has ", t.data.size(), " bytes of data but its ",
                       Sv(StDtypeName(t.dtype)), " shape needs ", numel * StDtypeSize(t.dtype)));
    }
    header[t.name] = {{"dtype", std::string(StDtypeName(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + offset);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  for (const StTensorData& t : tensors) out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<StTensorData>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  absl::StatusOr<std::vector<uint8_t>> bytes = SerializeSafetensors(tensors, metadata);
  if (!bytes.ok()) return bytes.status();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot create '", path, "'"));
  out.write(reinterpret_cast<const char*>(bytes->data()),
            static_cast<std::streamsize>(bytes->size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("cannot write '", path, "' (disk full?)"));
  return absl::OkStatus();
}

}  // namespace pinfer
