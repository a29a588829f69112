#include "examples/pagedinfer/synth_cache.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/synth/synth.h"

namespace pinfer::cli {

absl::StatusOr<std::string> CachedSynthModel(const std::string& shape,
                                             const std::string& file_type) {
  namespace fs = std::filesystem;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path dir = xdg && *xdg     ? fs::path(xdg) / "pagedinfer"
                       : home && *home ? fs::path(home) / ".cache/pagedinfer"
                                       : fs::temp_directory_path() / "pagedinfer";
  const fs::path path =
      dir / absl::StrCat("synth-", shape, "-", absl::AsciiStrToLower(file_type), ".gguf");
  if (fs::exists(path)) return path.string();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create the cache folder ", dir.string(), ": ", ec.message()));
  }
  std::fprintf(stderr, "writing a synthetic '%s' %s model (seeded random weights) to %s\n",
               shape.c_str(), file_type.c_str(), path.string().c_str());
  const std::string tmp = absl::StrCat(path.string(), ".tmp.", getpid());
  if (absl::Status s = WriteSynthModel(shape, file_type, tmp, SynthOptions{}); !s.ok()) {
    fs::remove(tmp, ec);
    return s;
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot rename ", tmp, " to ", path.string(), ": ", ec.message()));
  }
  return path.string();
}

}  // namespace pinfer::cli
