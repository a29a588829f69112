// Field readers shared by the request parsers (openai_request.cc, request_sampling.cc): each
// leaves *out as it is when the field is absent or null, and returns an ApiError naming the
// field when it has the wrong type or is out of range. Request bodies are parsed keeping
// their keys' order (a JSON schema's properties, a tool's parameters, what a chat template's
// tojson prints).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "server/openai_request.h"

namespace pinfer::server::request_json {

using json = nlohmann::ordered_json;

ApiError Bad(const std::string& param, const std::string& message);
// Present and not null.
bool Has(const json& body, const char* key);
std::optional<ApiError> GetNumber(const json& body, const char* key, double lo, double hi,
                                  float* out);
std::optional<ApiError> GetInt(const json& body, const char* key, int64_t lo, int64_t hi,
                               int64_t* out);
std::optional<ApiError> GetBool(const json& body, const char* key, bool* out);

// JSON text found inside a request or an answer (guided_json given as text, tool-call
// arguments, a model's tool call): parsed when it is within the request bodies' nesting
// limit (kRequestJsonLimits), else (or when it is not JSON) a discarded value.
json ParseEmbedded(std::string_view text);

}  // namespace pinfer::server::request_json
