// Chat templates of the common model families, recognised from the Jinja template a model
// carries (tokenizer.chat_template) by distinctive substrings and formatted in C++.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pinfer::server {

enum class ChatTemplate { kChatMl, kLlama2, kLlama3, kMistral, kGemma, kPhi3, kZephyr };

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// The family a Jinja template belongs to; ChatML when none is recognised (or it is empty).
ChatTemplate DetectChatTemplate(std::string_view jinja);
// "chatml", "llama2", "llama3", "mistral", "gemma", "phi3", "zephyr".
const char* ChatTemplateName(ChatTemplate t);

// The prompt text for the messages, ending with the assistant's turn opening. The leading
// BOS is left to the tokenizer (Encode with add_special); the result is meant to be encoded
// with parse_special so that markers such as <|im_start|> become their tokens.
std::string FormatChat(ChatTemplate t, const std::vector<ChatMessage>& messages);

// Text that ends an assistant turn in this family (used as a stop string as well as EOG ids).
const char* ChatTemplateEndOfTurn(ChatTemplate t);

}  // namespace pinfer::server
