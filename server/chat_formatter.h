// How a chat request becomes prompt pieces (chat_template.h's PromptPiece: template text,
// which may spell special tokens, or content, which never does):
//   - the model's own Jinja chat template (GGUF tokenizer.chat_template or
//     tokenizer_config.json), rendered by server/jinja with what Hugging Face's
//     apply_chat_template passes: messages, tools (None when there are none),
//     add_generation_prompt, bos_token, eos_token, and the request's chat_template_kwargs.
//     Message texts, tool calls, tool definitions and kwargs enter as content; the
//     renderer's content spans (server/jinja/marks.h) say which output bytes came from them;
//   - or a built-in family's formatter (chat_template.h), which also writes tool
//     definitions into the system message and tool calls and results in the family's syntax.
// A Jinja template is checked at start on a one-message conversation; when it uses a
// construct the subset lacks (or fails on that conversation), the built-in family recognised
// in it is used instead, and the note says so once. A construct first met at request time
// falls back for that request alone (logged once).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loaders/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/chat_template.h"
#include "server/jinja/template.h"
#include "server/tool_calls.h"

namespace pinfer::server {

class ChatFormatter {
 public:
  static std::shared_ptr<const ChatFormatter> BuiltIn(ChatTemplate family);
  // source: a Jinja chat template; tok: the model's (BOS/EOS texts). *note: what was decided
  // and why ("jinja", or "built-in llama3 (the Jinja template fails: <the construct>)").
  // options: strftime_now's clock (tests fix it) and the output bound.
  static std::shared_ptr<const ChatFormatter> FromJinja(const std::string& source,
                                                        const Tokenizer& tok, std::string* note,
                                                        jinja::RenderOptions options = {});
  // The model's own template (FromJinja); built-in ChatML when it has none.
  static std::shared_ptr<const ChatFormatter> ForModel(const Tokenizer& tok, std::string* note);

  // The prompt for `messages`, ending with the assistant's turn opening. tools: the request's
  // tools (an array) or null; kwargs: chat_template_kwargs (an object) or null.
  // InvalidArgument when the template refuses the conversation (its raise_exception message)
  // or fails on it.
  absl::StatusOr<std::vector<PromptPiece>> Format(const std::vector<ChatMessage>& messages,
                                                  const nlohmann::ordered_json& tools,
                                                  const nlohmann::ordered_json& kwargs) const;

  ChatTemplate family() const { return family_; }
  ToolSyntax tool_syntax() const { return syntax_; }
  bool is_jinja() const { return jinja_.has_value(); }
  // "jinja" or "built-in llama3".
  std::string Describe() const;

 private:
  ChatFormatter(ChatTemplate family, ToolSyntax syntax) : family_(family), syntax_(syntax) {}
  absl::StatusOr<std::vector<PromptPiece>> RenderJinja(const std::vector<ChatMessage>& messages,
                                                       const nlohmann::ordered_json& tools,
                                                       const nlohmann::ordered_json& kwargs) const;
  std::vector<PromptPiece> FormatBuiltIn(const std::vector<ChatMessage>& messages,
                                         const nlohmann::ordered_json& tools) const;

  ChatTemplate family_;
  ToolSyntax syntax_;
  std::optional<jinja::Template> jinja_;
  jinja::RenderOptions options_;
  std::string bos_text_, eos_text_;  // the tokens' texts (bos_token, eos_token)
  bool strip_bos_ = false;           // the tokenizer adds BOS: a rendered leading one goes
  mutable std::atomic<bool> fallback_logged_{false};
};

}  // namespace pinfer::server
