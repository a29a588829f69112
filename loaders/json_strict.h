// JSON parsing for model files and request bodies: syntax errors, documents over a size or
// nesting limit, and (by default) duplicate object keys are reported as absl::Status naming
// the source instead of exceptions or crashes. The nesting limit is checked by a linear scan
// before anything is built, so no later recursive walk of the document (dump, copy, compare)
// can go deeper than it; parsing itself does not recurse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace pinfer {

struct JsonLimits {
  size_t max_bytes = 64u << 20;  // the text's size
  int max_depth = 64;            // nested arrays and objects ([[1]] is 2 deep)
  bool refuse_duplicate_keys = true;
};

// config.json, tokenizer_config.json, quantization and index files: a few KiB in practice.
inline constexpr JsonLimits kConfigJsonLimits{16u << 20, 64, true};
// API request bodies (their size is the HTTP layer's limit; JSON schemas nest a little).
inline constexpr JsonLimits kRequestJsonLimits{SIZE_MAX, 64, false};
// tokenizer.json: tens of MiB for large vocabularies.
inline constexpr JsonLimits kTokenizerJsonLimits{512u << 20, 64, false};

// The size and nesting checks alone (no document is built): the first limit broken, with
// the byte offset where the nesting went too deep.
absl::Status CheckJsonLimits(std::string_view text, std::string_view source,
                             const JsonLimits& limits);

// Parses `text`; `source` names the file (or "request body") in error messages.
absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, std::string_view source,
                                         const JsonLimits& limits);

// ParseJson with the default limits: duplicate keys in any object are refused (nlohmann
// would silently keep the last one).
absl::StatusOr<nlohmann::json> ParseJsonStrict(std::string_view text, std::string_view source);

// Reads the whole file at `path` (refusing one over limits.max_bytes before reading it) and
// parses it with ParseJson.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path,
                                            const JsonLimits& limits = kConfigJsonLimits);

}  // namespace pinfer
