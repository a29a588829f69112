// libFuzzer target for the OpenAI request parser: the input is a request body. It is parsed as
// a /v1/chat/completions and as a /v1/completions body (server/openai_request.h), and given
// to /tokenize and /detokenize (server/tokenize.h) with a small byte-level vocabulary. No body
// may crash a parser; every error must make a valid OpenAI error JSON; a chat request that
// parses is formatted as ChatML and encoded as the server encodes it, and its messages, whatever
// they hold, must not add a single <|im_start|> or <|im_end|> token to the template's own.
// Built with -DPAGEDINFER_FUZZ=ON and clang as a fuzzer, and in every build as a replay test
// of its seed corpus (tests/fuzz/CMakeLists.txt).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "loaders/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/chat_prompt.h"
#include "server/chat_template.h"
#include "server/openai_request.h"
#include "server/tokenize.h"

namespace {

constexpr int32_t kImStart = 259, kImEnd = 260;

// <unk> <s> </s>, the 256 byte tokens (ids 3..258), <|im_start|> and <|im_end|> (control).
std::unique_ptr<pinfer::Tokenizer> MakeTokenizer() {
  pinfer::TokenizerSpec s;
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.types = {pinfer::TokenType::kUnknown, pinfer::TokenType::kControl, pinfer::TokenType::kControl};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    s.tokens.push_back(buf);
    s.types.push_back(pinfer::TokenType::kByte);
  }
  s.tokens.push_back("<|im_start|>");
  s.tokens.push_back("<|im_end|>");
  s.types.push_back(pinfer::TokenType::kControl);
  s.types.push_back(pinfer::TokenType::kControl);
  s.scores.assign(s.tokens.size(), 0.0f);
  s.unk_id = 0;
  s.bos_id = 1;
  s.eos_id = 2;
  absl::StatusOr<std::unique_ptr<pinfer::Tokenizer>> t = pinfer::Tokenizer::Create(std::move(s));
  if (!t.ok()) __builtin_trap();
  return std::move(*t);
}

void CheckError(const pinfer::server::ApiError& e) {
  const nlohmann::json j = nlohmann::json::parse(pinfer::server::ErrorJson(e), nullptr, false);
  if (j.is_discarded() || !j["error"]["message"].is_string()) __builtin_trap();
}

void CheckChatTokens(const pinfer::Tokenizer& tok, const pinfer::server::ParsedRequest& r) {
  const pinfer::server::ChatPromptEncoder encoder(tok);
  const std::vector<int32_t> ids = encoder.Encode(
      pinfer::server::FormatChatPieces(pinfer::server::ChatTemplate::kChatMl, r.messages));
  const auto starts = std::count(ids.begin(), ids.end(), kImStart);
  const auto ends = std::count(ids.begin(), ids.end(), kImEnd);
  const auto n = static_cast<long>(r.messages.size());
  if (starts != n + 1 || ends != n) __builtin_trap();  // a message forged a turn boundary
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<pinfer::Tokenizer> tok = MakeTokenizer();
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (bool chat : {true, false}) {
    pinfer::server::ParsedRequest r;
    if (std::optional<pinfer::server::ApiError> e = pinfer::server::ParseRequest(body, chat, &r)) {
      CheckError(*e);
    } else if (chat) {
      CheckChatTokens(*tok, r);
    }
  }
  std::string out;
  if (auto e = pinfer::server::TokenizeBody(body, *tok, 4096, &out)) CheckError(*e);
  if (auto e = pinfer::server::DetokenizeBody(body, *tok, &out)) CheckError(*e);
  return 0;
}
