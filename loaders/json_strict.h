// JSON parsing for model files: syntax errors and duplicate object keys are reported as
// absl::Status naming the source (file path) instead of exceptions.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace pinfer {

// Parses `text`; `source` names the file in error messages. Duplicate keys in any object are
// refused (nlohmann would silently keep the last one).
absl::StatusOr<nlohmann::json> ParseJsonStrict(std::string_view text, std::string_view source);

// Reads the whole file at `path` and parses it with ParseJsonStrict.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

}  // namespace pinfer
