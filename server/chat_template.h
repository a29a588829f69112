// Chat templates of the common model families, recognised from the Jinja template a model
// carries (tokenizer.chat_template) by distinctive substrings and formatted in C++.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace pinfer::server {

enum class ChatTemplate { kChatMl, kLlama2, kLlama3, kMistral, kGemma, kPhi3, kZephyr };

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}

  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  bool content_null = false;  // an assistant message with tool calls and no text
  // assistant: OpenAI's tool_calls ([{id, type, function: {name, arguments}}], arguments
  // parsed into an object where they are JSON text, as vLLM hands them to templates); null:
  // none. tool: the call it answers (tool_call_id) and the function's name, when given.
  nlohmann::ordered_json tool_calls;
  std::string tool_call_id;
  std::string name;
};

// The family a Jinja template belongs to; ChatML when none is recognised (or it is empty).
ChatTemplate DetectChatTemplate(std::string_view jinja);
// "chatml", "llama2", "llama3", "mistral", "gemma", "phi3", "zephyr".
const char* ChatTemplateName(ChatTemplate t);

// A run of a formatted chat prompt: the template's own text (markers such as <|im_start|>,
// role names, separators) or text that came from a message. Only the template's text may
// spell special tokens (see chat_prompt.h); a message's text is always plain text.
struct PromptPiece {
  std::string text;
  bool from_template = true;
};

// The prompt for the messages, ending with the assistant's turn opening, piece by piece.
// The leading BOS is left to the tokenizer.
std::vector<PromptPiece> FormatChatPieces(ChatTemplate t, const std::vector<ChatMessage>& messages);
// The same prompt as one string (the pieces' texts joined).
std::string FormatChat(ChatTemplate t, const std::vector<ChatMessage>& messages);

// Text that ends an assistant turn in this family (used as a stop string as well as EOG ids).
const char* ChatTemplateEndOfTurn(ChatTemplate t);

}  // namespace pinfer::server
