// Reads a whole text file for the subcommands that take -f FILE.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace pinfer::cli {

// NotFound naming the path when it cannot be opened.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace pinfer::cli
