// SafetensorsModel: a checkpoint folder, unsharded or sharded through
// model.safetensors.index.json.
#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"
#include "loaders/json_strict.h"
#include "loaders/safetensors.h"

namespace pinfer {
namespace {

namespace fs = std::filesystem;

// Shard names must be plain relative paths that stay inside the folder.
absl::Status CheckShardName(const std::string& index_path, const std::string& shard) {
  const fs::path p(shard);
  bool escapes = shard.empty() || p.is_absolute() || p.has_root_name() || p.has_root_directory();
  for (const fs::path& part : p) {
    if (part == "..") escapes = true;
  }
  if (escapes) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path, ": shard name '", shard,
                     "' is not a file name inside the checkpoint folder; refusing to open it"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsModel>> SafetensorsModel::Open(const std::string& path) {
  std::unique_ptr<SafetensorsModel> m(new SafetensorsModel());
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
    if (!f.ok()) return f.status();
    m->folder_ = fs::path(path).parent_path().string();
    m->files_.push_back(*std::move(f));
  } else if (fs::is_directory(path, ec)) {
    m->folder_ = path;
    const std::string index_path = (fs::path(path) / "model.safetensors.index.json").string();
    const std::string single_path = (fs::path(path) / "model.safetensors").string();
    if (fs::exists(index_path, ec)) {
      absl::StatusOr<nlohmann::json> index = ReadJsonFile(index_path);
      if (!index.ok()) return index.status();
      if (!index->is_object() || !index->contains("weight_map") ||
          !(*index)["weight_map"].is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, ": no \"weight_map\" object mapping tensor names to shards"));
      }
      std::map<std::string, SafetensorsFile*> shards;
      for (const auto& [tensor, shard_json] : (*index)["weight_map"].items()) {
        if (!shard_json.is_string()) {
          return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map entry for '",
                                                         tensor, "' is not a file name string"));
        }
        const std::string shard = shard_json.get<std::string>();
        if (absl::Status s = CheckShardName(index_path, shard); !s.ok()) return s;
        auto it = shards.find(shard);
        if (it == shards.end()) {
          const std::string shard_path = (fs::path(path) / shard).string();
          if (!fs::exists(shard_path, ec)) {
            return absl::NotFoundError(absl::StrCat(index_path, ": shard '", shard,
                                                    "' (for tensor '", tensor,
                                                    "') is missing from the folder; download it"));
          }
          absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(shard_path);
          if (!f.ok()) return f.status();
          it = shards.emplace(shard, f->get()).first;
          m->files_.push_back(*std::move(f));
        }
        const StTensor* t = it->second->Find(tensor);
        if (t == nullptr) {
          return absl::NotFoundError(absl::StrCat(index_path, ": tensor '", tensor,
                                                  "' is mapped to shard '", shard,
                                                  "' but that shard does not contain it"));
        }
        m->index_[tensor] = t;
      }
    } else if (fs::exists(single_path, ec)) {
      absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(single_path);
      if (!f.ok()) return f.status();
      m->files_.push_back(*std::move(f));
    } else {
      return absl::NotFoundError(absl::StrCat(
          "'", path, "' has neither model.safetensors nor model.safetensors.index.json"));
    }
  } else {
    return absl::NotFoundError(absl::StrCat("'", path, "' is not a file or folder"));
  }
  if (m->index_.empty()) {  // unsharded: every tensor of the single file
    for (const StTensor& t : m->files_.front()->tensors()) m->index_[t.name] = &t;
  }
  for (const auto& [name, t] : m->index_) m->tensors_.push_back(t);
  return m;
}

const StTensor* SafetensorsModel::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

}  // namespace pinfer
