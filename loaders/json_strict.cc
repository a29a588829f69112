#include "loaders/json_strict.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"

namespace pinfer {

absl::Status CheckJsonLimits(std::string_view text, std::string_view source,
                             const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(source), ": ", text.size(),
                                                   " bytes of JSON; at most ", limits.max_bytes,
                                                   " are accepted"));
  }
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limits.max_depth) {
        return absl::InvalidArgumentError(absl::StrCat(Sv(source), ": JSON nested more than ",
                                                       limits.max_depth, " levels deep (at byte ",
                                                       i, "); the file is damaged or hostile"));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, std::string_view source,
                                         const JsonLimits& limits) {
  using nlohmann::json;
  if (absl::Status s = CheckJsonLimits(text, source, limits); !s.ok()) return s;
  std::vector<std::set<std::string>> keys_per_object;
  std::string duplicate;
  json::parser_callback_t cb = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        keys_per_object.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys_per_object.empty()) keys_per_object.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys_per_object.empty() && parsed.is_string()) {
          const std::string& k = parsed.get_ref<const std::string&>();
          if (!keys_per_object.back().insert(k).second && duplicate.empty()) duplicate = k;
        }
        break;
      default:
        break;
    }
    return true;
  };
  json doc;
  try {
    doc = limits.refuse_duplicate_keys
              ? json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true)
              : json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(source), ": invalid JSON (", e.what(),
                                                   "); the file is damaged or not JSON"));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(source), ": duplicate JSON key '", duplicate,
                                                   "'; each name must appear once"));
  }
  return doc;
}

absl::StatusOr<nlohmann::json> ParseJsonStrict(std::string_view text, std::string_view source) {
  return ParseJson(text, source, JsonLimits{});
}

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path, const JsonLimits& limits) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > limits.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", size, " bytes of JSON; at most ",
                                                   limits.max_bytes, " are accepted"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read '", path, "'"));
  return ParseJson(ss.str(), path, limits);
}

}  // namespace pinfer
