#include "server/chat_template.h"

namespace pinfer::server {
namespace {

bool Has(std::string_view s, std::string_view part) { return s.find(part) != s.npos; }

// Llama 2 and Mistral fold a system message into the first user turn.
std::string FormatInst(const std::vector<ChatMessage>& msgs, bool llama2_sys) {
  std::string out, system;
  bool first_user = true;
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") {
      system += (system.empty() ? "" : "\n") + m.content;
    } else if (m.role == "user") {
      std::string content = m.content;
      if (first_user && !system.empty()) {
        content = llama2_sys ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content
                             : system + "\n\n" + content;
      }
      if (!first_user) out += "<s>";
      out += "[INST] " + content + " [/INST]";
      first_user = false;
    } else {  // assistant
      out += " " + m.content + "</s>";
    }
  }
  return out;
}

}  // namespace

ChatTemplate DetectChatTemplate(std::string_view j) {
  if (Has(j, "<|im_start|>")) return ChatTemplate::kChatMl;
  if (Has(j, "<|start_header_id|>")) return ChatTemplate::kLlama3;
  if (Has(j, "<start_of_turn>")) return ChatTemplate::kGemma;
  if (Has(j, "<|user|>")) {
    // Phi-3 closes turns with <|end|>; Zephyr with the EOS token </s> (eos_token).
    return Has(j, "<|end|>") ? ChatTemplate::kPhi3 : ChatTemplate::kZephyr;
  }
  if (Has(j, "[INST]")) {
    // Llama 2 wraps the system prompt in <<SYS>>; Mistral's template has none.
    return Has(j, "<<SYS>>") ? ChatTemplate::kLlama2 : ChatTemplate::kMistral;
  }
  return ChatTemplate::kChatMl;
}

const char* ChatTemplateName(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kChatMl:
      return "chatml";
    case ChatTemplate::kLlama2:
      return "llama2";
    case ChatTemplate::kLlama3:
      return "llama3";
    case ChatTemplate::kMistral:
      return "mistral";
    case ChatTemplate::kGemma:
      return "gemma";
    case ChatTemplate::kPhi3:
      return "phi3";
    case ChatTemplate::kZephyr:
      return "zephyr";
  }
  return "chatml";
}

const char* ChatTemplateEndOfTurn(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kChatMl:
      return "<|im_end|>";
    case ChatTemplate::kLlama3:
      return "<|eot_id|>";
    case ChatTemplate::kGemma:
      return "<end_of_turn>";
    case ChatTemplate::kPhi3:
      return "<|end|>";
    case ChatTemplate::kLlama2:
    case ChatTemplate::kMistral:
    case ChatTemplate::kZephyr:
      return "</s>";
  }
  return "</s>";
}

std::string FormatChat(ChatTemplate t, const std::vector<ChatMessage>& msgs) {
  std::string out;
  switch (t) {
    case ChatTemplate::kLlama2:
      return FormatInst(msgs, /*llama2_sys=*/true);
    case ChatTemplate::kMistral:
      return FormatInst(msgs, /*llama2_sys=*/false);
    case ChatTemplate::kChatMl:
      for (const ChatMessage& m : msgs) {
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      }
      return out + "<|im_start|>assistant\n";
    case ChatTemplate::kLlama3:
      for (const ChatMessage& m : msgs) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      }
      return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatTemplate::kGemma: {
      // Gemma has no system role: the system text opens the first user turn.
      std::string system;
      for (const ChatMessage& m : msgs) {
        if (m.role == "system") {
          system += m.content + "\n\n";
          continue;
        }
        const std::string role = m.role == "assistant" ? "model" : m.role;
        std::string content = m.content;
        if (role == "user" && !system.empty()) content = system + content, system.clear();
        out += "<start_of_turn>" + role + "\n" + content + "<end_of_turn>\n";
      }
      return out + "<start_of_turn>model\n";
    }
    case ChatTemplate::kPhi3:
      for (const ChatMessage& m : msgs) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
      return out + "<|assistant|>\n";
    case ChatTemplate::kZephyr:
      for (const ChatMessage& m : msgs) out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
      return out + "<|assistant|>\n";
  }
  return out;
}

}  // namespace pinfer::server
