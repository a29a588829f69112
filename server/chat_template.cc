#include "server/chat_template.h"

namespace pinfer::server {
namespace {

bool Has(std::string_view s, std::string_view part) { return s.find(part) != s.npos; }

// Collects pieces, merging neighbours of the same kind.
class Pieces {
 public:
  Pieces& T(std::string_view text) { return Add(text, true); }   // the template's text
  Pieces& C(std::string_view text) { return Add(text, false); }  // a message's text
  std::vector<PromptPiece> Take() { return std::move(out_); }

 private:
  Pieces& Add(std::string_view text, bool from_template) {
    if (text.empty()) return *this;
    if (!out_.empty() && out_.back().from_template == from_template) {
      out_.back().text.append(text);
    } else {
      out_.push_back({std::string(text), from_template});
    }
    return *this;
  }
  std::vector<PromptPiece> out_;
};

// Llama 2 and Mistral fold the system messages into the first user turn.
void FormatInst(const std::vector<ChatMessage>& msgs, bool llama2_sys, Pieces* p) {
  std::vector<const std::string*> system;
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") system.push_back(&m.content);
  }
  bool first_user = true;
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") continue;
    if (m.role != "user") {  // assistant
      p->T(" ").C(m.content).T("</s>");
      continue;
    }
    if (!first_user) p->T("<s>");
    p->T("[INST] ");
    if (first_user && !system.empty()) {
      if (llama2_sys) p->T("<<SYS>>\n");
      for (size_t i = 0; i < system.size(); ++i) p->T(i ? "\n" : "").C(*system[i]);
      p->T(llama2_sys ? "\n<</SYS>>\n\n" : "\n\n");
    }
    p->C(m.content).T(" [/INST]");
    first_user = false;
  }
}

void FormatGemma(const std::vector<ChatMessage>& msgs, Pieces* p) {
  // Gemma has no system role: the system text opens the first user turn.
  std::vector<const std::string*> system;
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") {
      system.push_back(&m.content);
      continue;
    }
    const bool user = m.role == "user";
    p->T("<start_of_turn>").T(m.role == "assistant" ? "model" : m.role).T("\n");
    if (user) {
      for (const std::string* s : system) p->C(*s).T("\n\n");
      system.clear();
    }
    p->C(m.content).T("<end_of_turn>\n");
  }
  p->T("<start_of_turn>model\n");
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

std::vector<PromptPiece> FormatChatPieces(ChatTemplate t, const std::vector<ChatMessage>& msgs) {
  Pieces p;
  switch (t) {
    case ChatTemplate::kLlama2:
    case ChatTemplate::kMistral:
      FormatInst(msgs, /*llama2_sys=*/t == ChatTemplate::kLlama2, &p);
      break;
    case ChatTemplate::kChatMl:
      for (const ChatMessage& m : msgs) {
        p.T("<|im_start|>").T(m.role).T("\n").C(m.content).T("<|im_end|>\n");
      }
      p.T("<|im_start|>assistant\n");
      break;
    case ChatTemplate::kLlama3:
      for (const ChatMessage& m : msgs) {
        p.T("<|start_header_id|>")
            .T(m.role)
            .T("<|end_header_id|>\n\n")
            .C(m.content)
            .T("<|eot_id|>");
      }
      p.T("<|start_header_id|>assistant<|end_header_id|>\n\n");
      break;
    case ChatTemplate::kGemma:
      FormatGemma(msgs, &p);
      break;
    case ChatTemplate::kPhi3:
    case ChatTemplate::kZephyr: {
      const char* end = t == ChatTemplate::kPhi3 ? "<|end|>\n" : "</s>\n";
      for (const ChatMessage& m : msgs) p.T("<|").T(m.role).T("|>\n").C(m.content).T(end);
      p.T("<|assistant|>\n");
      break;
    }
  }
  return p.Take();
}

std::string FormatChat(ChatTemplate t, const std::vector<ChatMessage>& msgs) {
  std::string out;
  for (const PromptPiece& piece : FormatChatPieces(t, msgs)) out += piece.text;
  return out;
}

}  // namespace pinfer::server
