#include "server/request_json.h"

#include <cmath>

#include "loaders/json_strict.h"

namespace pinfer::server::request_json {

ApiError Bad(const std::string& param, const std::string& message) {
  ApiError e;
  e.message = message;
  e.param = param;
  return e;
}

bool Has(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

std::optional<ApiError> GetNumber(const json& body, const char* key, double lo, double hi,
                                  float* out) {
  if (!Has(body, key)) return std::nullopt;
  const json& v = body[key];
  if (!v.is_number()) return Bad(key, std::string(key) + " must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    return Bad(key, std::string(key) + " = " + v.dump() + " is out of range (" + json(lo).dump() +
                        ".." + json(hi).dump() + ")");
  }
  *out = static_cast<float>(d);
  return std::nullopt;
}

std::optional<ApiError> GetInt(const json& body, const char* key, int64_t lo, int64_t hi,
                               int64_t* out) {
  if (!Has(body, key)) return std::nullopt;
  const json& v = body[key];
  if (!v.is_number_integer()) return Bad(key, std::string(key) + " must be an integer");
  const int64_t i = v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t)INT64_MAX
                        ? INT64_MAX
                        : v.get<int64_t>();
  if (i < lo || i > hi) {
    return Bad(key, std::string(key) + " = " + v.dump() + " is out of range (" +
                        std::to_string(lo) + ".." + std::to_string(hi) + ")");
  }
  *out = i;
  return std::nullopt;
}

std::optional<ApiError> GetBool(const json& body, const char* key, bool* out) {
  if (!Has(body, key)) return std::nullopt;
  if (!body[key].is_boolean()) return Bad(key, std::string(key) + " must be true or false");
  *out = body[key].get<bool>();
  return std::nullopt;
}

json ParseEmbedded(std::string_view text) {
  if (!CheckJsonLimits(text, "embedded JSON", kRequestJsonLimits).ok()) {
    return json(json::value_t::discarded);
  }
  return json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

}  // namespace pinfer::server::request_json
