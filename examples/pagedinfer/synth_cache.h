// Synthetic models kept in the user's cache folder ($XDG_CACHE_HOME/pagedinfer or
// ~/.cache/pagedinfer), written once on first use, for subcommands that run without -m.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace pinfer::cli {

// The path of shape `shape` stored as `file_type` (e.g. "tiny", "Q4_K_M"), writing it first
// (to a temporary name, then renamed, so a concurrent reader never sees half a file) when
// absent. Says on stderr when it writes.
absl::StatusOr<std::string> CachedSynthModel(const std::string& shape,
                                             const std::string& file_type);

}  // namespace pinfer::cli
