// libFuzzer target for the chat-template renderers: the input is a Jinja template, a NUL
// byte, then a message's text (the rest). The template is parsed and rendered by the
// Jinja-subset interpreter (server/jinja) over a conversation holding that text, as a chat
// request would render a model's template; it must give text or an error, never crash, hang
// or grow without bound. Rendered again with the conversation's strings as content (as
// server/chat_formatter.h renders a request), the text must be the same (templates cannot see
// content spans) and the spans sorted, disjoint and inside it. The built-in family formatter
// the server falls back to (DetectChatTemplate + FormatChatPieces) runs on the same template
// and messages, and the pieces must join to FormatChat's prompt.
// Built with -DPAGEDINFER_FUZZ=ON and clang as a fuzzer, and in every build as a replay test
// of its seed corpus (tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/chat_template.h"
#include "server/jinja/template.h"

namespace {

using ojson = nlohmann::ordered_json;

ojson Context(const std::string& text) {
  auto msg = [](const char* role, const std::string& content) {
    return ojson{{"role", role}, {"content", content}};
  };
  ojson tool = {{"type", "function"},
                {"function",
                 {{"name", "get_weather"},
                  {"description", text},
                  {"parameters", {{"type", "object"}, {"properties", ojson::object()}}}}}};
  return ojson{{"messages", ojson::array({msg("system", "Be brief."), msg("user", text),
                                          msg("assistant", "Yes."), msg("user", text)})},
               {"tools", ojson::array({tool})},
               {"add_generation_prompt", true},
               {"bos_token", "<s>"},
               {"eos_token", "</s>"}};
}

// Spans sorted, disjoint, not touching, none empty, inside the text (value.h's ContentSpans).
void CheckSpans(const pinfer::jinja::MarkedText& m) {
  size_t end = 0;
  for (size_t i = 0; i < m.content().size(); ++i) {
    const auto [b, e] = m.content()[i];
    if (b >= e || e > m.size() || (i > 0 && b <= end)) __builtin_trap();
    end = e;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view source = in.substr(0, nul);
  // The message text is valid UTF-8 in a real request (JSON strings are); keep it so here.
  const std::string text =
      ojson(std::string(nul == std::string_view::npos ? "" : in.substr(nul + 1)))
          .dump(-1, ' ', false, ojson::error_handler_t::ignore);
  const std::string message = ojson::parse(text).get<std::string>();

  absl::StatusOr<pinfer::jinja::Template> t = pinfer::jinja::Template::Parse(source);
  if (t.ok()) {
    pinfer::jinja::RenderOptions options;
    options.now = 1700000000;
    options.max_output_bytes = 1 << 20;
    options.max_steps = 1 << 12;  // the default bounds' errors, reached in milliseconds
    options.max_work = 1 << 22;
    const ojson context = Context(message);
    absl::StatusOr<std::string> out = t->Render(pinfer::jinja::Value::FromJson(context), options);
    if (out.ok() && out->size() > options.max_output_bytes) __builtin_trap();
    auto marked = t->RenderMarked(pinfer::jinja::Value::FromJson(context, true), options);
    if (marked.ok() != out.ok() || (out.ok() && marked->text() != *out)) __builtin_trap();
    if (marked.ok()) CheckSpans(*marked);
  }

  const pinfer::server::ChatTemplate family = pinfer::server::DetectChatTemplate(source);
  const std::vector<pinfer::server::ChatMessage> messages = {
      {"system", "Be brief."}, {"user", message}, {"assistant", "Yes."}, {"user", message}};
  std::string joined;
  for (const auto& piece : pinfer::server::FormatChatPieces(family, messages)) joined += piece.text;
  if (joined != pinfer::server::FormatChat(family, messages)) __builtin_trap();
  return 0;
}
