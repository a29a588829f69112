#include "server/response_json.h"

#include <mutex>
#include <random>

#include "absl/strings/str_format.h"
#include "engine/build_info.h"

namespace pinfer::server {
namespace {

using json = nlohmann::json;

json Bytes(const std::string& s) {
  json out = json::array();
  for (char c : s) out.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return out;
}

std::string Piece(const Tokenizer& tok, int32_t id) {
  if (id < 0 || id >= tok.n_vocab()) return "";
  return tok.IsControl(id) ? tok.spec().tokens[static_cast<size_t>(id)] : tok.TokenBytes(id);
}

}  // namespace

bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    }
    i += static_cast<size_t>(len);
  }
  return true;
}

std::string TokenText(const Tokenizer& tok, int32_t id) {
  const std::string piece = Piece(tok, id);
  if (IsValidUtf8(piece)) return piece;
  std::string out = "bytes:";
  for (char c : piece) absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(c));
  return out;
}

json CompletionLogprobs(const Tokenizer& tok, const std::vector<SampledLogprobs>& lps,
                        size_t* offset) {
  json tokens = json::array(), logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const SampledLogprobs& lp : lps) {
    tokens.push_back(TokenText(tok, lp.chosen.token));
    logprobs.push_back(lp.chosen.logprob);
    // OpenAI always includes the sampled token: up to logprobs + 1 entries.
    json alternatives = json::object();
    for (const TokenLogprob& t : lp.top) alternatives[TokenText(tok, t.token)] = t.logprob;
    alternatives[TokenText(tok, lp.chosen.token)] = lp.chosen.logprob;
    top.push_back(std::move(alternatives));
    offsets.push_back(*offset);
    *offset += Piece(tok, lp.chosen.token).size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

json ChatLogprobs(const Tokenizer& tok, const std::vector<SampledLogprobs>& lps) {
  auto entry = [&](const TokenLogprob& t) {
    return json{{"token", TokenText(tok, t.token)},
                {"logprob", t.logprob},
                {"bytes", Bytes(Piece(tok, t.token))}};
  };
  json content = json::array();
  for (const SampledLogprobs& lp : lps) {
    json e = entry(lp.chosen);
    json top = json::array();
    for (const TokenLogprob& t : lp.top) top.push_back(entry(t));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json UsageJson(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

std::string RandomId(const std::string& prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }());
  uint64_t a, b;
  {
    std::lock_guard<std::mutex> lock(mu);
    a = rng();
    b = rng();
  }
  return absl::StrFormat("%s%016x%016x", prefix, a, b);
}

std::string SystemFingerprint(const std::string& model_path, const std::string& weight_format,
                              const std::string& kv_format) {
  // FNV-1a over the parts: stable across runs of the same configuration.
  uint64_t h = 1469598103934665603ull;
  for (const std::string& part : {BuildInfo(), model_path, weight_format, kv_format}) {
    for (char c : part) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  }
  return absl::StrFormat("fp_%012x", h & 0xffffffffffffull);
}

}  // namespace pinfer::server
