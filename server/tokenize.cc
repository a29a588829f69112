#include "server/tokenize.h"

#include "loaders/json_strict.h"
#include "nlohmann/json.hpp"
#include "server/request_json.h"
#include "server/response_json.h"

namespace pinfer::server {
namespace {

using json = nlohmann::json;
using request_json::Bad;
using request_json::GetBool;

std::optional<ApiError> Object(const std::string& body, request_json::json* j) {
  if (absl::Status s = CheckJsonLimits(body, "the request body", kRequestJsonLimits); !s.ok()) {
    return Bad("", std::string(s.message()));
  }
  *j = request_json::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j->is_discarded()) return Bad("", "the request body is not valid JSON");
  if (!j->is_object()) return Bad("", "the request body must be a JSON object");
  return std::nullopt;
}

// A piece as llama-server shows it: the text when it is valid UTF-8, else its bytes.
json PieceJson(const std::string& piece) {
  if (IsValidUtf8(piece)) return piece;
  json bytes = json::array();
  for (char c : piece) bytes.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return bytes;
}

}  // namespace

std::optional<ApiError> TokenizeBody(const std::string& body, const Tokenizer& tok,
                                     int max_model_len, std::string* out) {
  request_json::json j;
  if (auto e = Object(body, &j)) return e;
  const char* key = j.contains("content") ? "content" : "prompt";
  if (!j.contains(key) || !j[key].is_string()) {
    return Bad("content", "content must be the text to tokenize");
  }
  bool add_special = false, parse_special = true, with_pieces = false;
  for (auto [name, flag] : {std::pair{"add_special", &add_special},
                            {"add_special_tokens", &add_special},
                            {"parse_special", &parse_special},
                            {"with_pieces", &with_pieces}}) {
    if (auto e = GetBool(j, name, flag)) return e;
  }
  const std::vector<int32_t> ids =
      tok.Encode(j[key].get<std::string>(), add_special, parse_special);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string piece =
        tok.IsControl(id) ? tok.spec().tokens[static_cast<size_t>(id)] : tok.TokenBytes(id);
    tokens.push_back({{"id", id}, {"piece", PieceJson(piece)}});
  }
  *out = json{{"tokens", tokens}, {"count", ids.size()}, {"max_model_len", max_model_len}}.dump();
  return std::nullopt;
}

std::optional<ApiError> DetokenizeBody(const std::string& body, const Tokenizer& tok,
                                       std::string* out) {
  request_json::json j;
  if (auto e = Object(body, &j)) return e;
  if (!j.contains("tokens") || !j["tokens"].is_array()) {
    return Bad("tokens", "tokens must be an array of token ids");
  }
  std::vector<int32_t> ids;
  for (const auto& t : j["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.n_vocab()) {
      return Bad("tokens", "token ids are integers from 0 to " + std::to_string(tok.n_vocab() - 1));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  *out = json{{"content", tok.Decode(ids)}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return std::nullopt;
}

}  // namespace pinfer::server
