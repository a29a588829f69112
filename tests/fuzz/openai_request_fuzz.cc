// libFuzzer target for the OpenAI request parser: the input is a request body. It is parsed as
// a /v1/chat/completions and as a /v1/completions body (server/openai_request.h), and given
// to /tokenize and /detokenize (server/tokenize.h) with a small byte-level vocabulary. No body
// may crash a parser; every error must make a valid OpenAI error JSON; a chat request that
// parses is formatted as ChatML, by the built-in formatter and by a ChatML Jinja template that
// also writes the tools and tool calls (server/chat_formatter.h, the server's default path),
// and encoded as the server encodes it; its messages, tools and chat_template_kwargs, whatever
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
#include "server/chat_formatter.h"
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

// ChatML with the tools in a system turn of their own and the calls after the content.
constexpr char kChatMlTools[] =
    "{%- if tools %}<|im_start|>system\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}"
    "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function | tojson }}</tool_call>"
    "{% endfor %}<|im_end|>\n{% endfor %}<|im_start|>assistant\n";

// The prompt's ids hold `turns` + 1 <|im_start|> (the answer's too) and `turns` <|im_end|>.
void CheckTurns(const std::vector<int32_t>& ids, long turns) {
  const auto starts = std::count(ids.begin(), ids.end(), kImStart);
  const auto ends = std::count(ids.begin(), ids.end(), kImEnd);
  if (starts != turns + 1 || ends != turns) __builtin_trap();  // a turn boundary was forged
}

void CheckChatTokens(const pinfer::Tokenizer& tok, const pinfer::server::ParsedRequest& r) {
  const pinfer::server::ChatPromptEncoder encoder(tok);
  const auto n = static_cast<long>(r.messages.size());
  CheckTurns(encoder.Encode(pinfer::server::FormatChatPieces(pinfer::server::ChatTemplate::kChatMl,
                                                             r.messages)),
             n);
  static const std::shared_ptr<const pinfer::server::ChatFormatter> jinja = [&tok] {
    std::string note;
    auto f = pinfer::server::ChatFormatter::FromJinja(kChatMlTools, tok, &note);
    if (!f->is_jinja()) __builtin_trap();  // the template must run in the interpreter
    return f;
  }();
  auto pieces = jinja->Format(r.messages, r.tools, r.chat_template_kwargs);
  if (!pieces.ok()) return;  // a refusal (a value over the render bounds) is an answer too
  const bool has_tools = r.tools.is_array() && !r.tools.empty();
  CheckTurns(encoder.Encode(*pieces), n + (has_tools ? 1 : 0));
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
