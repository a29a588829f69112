#include "loaders/json_strict.h"

#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"

namespace pinfer {

absl::StatusOr<nlohmann::json> ParseJsonStrict(std::string_view text, std::string_view source) {
  using nlohmann::json;
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
    doc = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true);
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

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read '", path, "'"));
  return ParseJsonStrict(ss.str(), path);
}

}  // namespace pinfer
