#include "server/chat_template.h"

#include <gtest/gtest.h>

namespace pinfer::server {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Why?"}};

TEST(ChatTemplateTest, DetectsEachFamilyFromItsJinjaTemplate) {
  EXPECT_EQ(DetectChatTemplate("{{ '<|im_start|>' + message['role'] }}"), ChatTemplate::kChatMl);
  EXPECT_EQ(DetectChatTemplate("{{ '<|start_header_id|>' + message['role'] + "
                               "'<|end_header_id|>' }}{{ '<|eot_id|>' }}"),
            ChatTemplate::kLlama3);
  EXPECT_EQ(DetectChatTemplate("{{ bos_token + '[INST] <<SYS>>\\n' + system }}"),
            ChatTemplate::kLlama2);
  EXPECT_EQ(DetectChatTemplate("{{ '[INST] ' + message['content'] + ' [/INST]' }}"),
            ChatTemplate::kMistral);
  EXPECT_EQ(DetectChatTemplate("{{ '<start_of_turn>' + role }}"), ChatTemplate::kGemma);
  EXPECT_EQ(DetectChatTemplate("{{'<|user|>' + '\\n' + message['content'] + '<|end|>'}}"),
            ChatTemplate::kPhi3);
  EXPECT_EQ(DetectChatTemplate("{{ '<|user|>\\n' + message['content'] + eos_token }}"),
            ChatTemplate::kZephyr);
  EXPECT_EQ(DetectChatTemplate(""), ChatTemplate::kChatMl);
  EXPECT_EQ(DetectChatTemplate("{% something unknown %}"), ChatTemplate::kChatMl);
}

TEST(ChatTemplateTest, ChatMl) {
  EXPECT_EQ(FormatChat(ChatTemplate::kChatMl, kConversation),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, Llama2FoldsTheSystemPromptIntoTheFirstTurn) {
  EXPECT_EQ(FormatChat(ChatTemplate::kLlama2, kConversation),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello.</s><s>[INST] Why? [/INST]");
}

TEST(ChatTemplateTest, Mistral) {
  EXPECT_EQ(FormatChat(ChatTemplate::kMistral, kConversation),
            "[INST] Be brief.\n\nHi [/INST] Hello.</s><s>[INST] Why? [/INST]");
}

TEST(ChatTemplateTest, Llama3) {
  EXPECT_EQ(FormatChat(ChatTemplate::kLlama3, {{"user", "Hi"}}),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTest, GemmaHasNoSystemRoleAndCallsTheAssistantModel) {
  EXPECT_EQ(FormatChat(ChatTemplate::kGemma, kConversation),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello."
            "<end_of_turn>\n<start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplateTest, Phi3) {
  EXPECT_EQ(FormatChat(ChatTemplate::kPhi3, {{"user", "Hi"}, {"assistant", "Yo"}}),
            "<|user|>\nHi<|end|>\n<|assistant|>\nYo<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplateTest, ZephyrEndsTurnsWithEos) {
  EXPECT_EQ(FormatChat(ChatTemplate::kZephyr, {{"system", "S"}, {"user", "Hi"}}),
            "<|system|>\nS</s>\n<|user|>\nHi</s>\n<|assistant|>\n");
  EXPECT_STREQ(ChatTemplateEndOfTurn(ChatTemplate::kZephyr), "</s>");
  EXPECT_STREQ(ChatTemplateName(ChatTemplate::kZephyr), "zephyr");
}

}  // namespace
}  // namespace pinfer::server
