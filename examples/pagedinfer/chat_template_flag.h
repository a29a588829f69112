// --chat-template NAME|FILE (chat, serve): the template family to format conversations with,
// overriding the one detected from the model's tokenizer.chat_template.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "examples/pagedinfer/args.h"
#include "loaders/tokenizer.h"
#include "server/chat_template.h"

namespace pinfer::cli {

// Registers --chat-template on `args`, writing to *flag.
void RegisterChatTemplateFlag(Args& args, std::string* flag);

struct ResolvedTemplate {
  server::ChatTemplate tmpl = server::ChatTemplate::kChatMl;
  std::string source;  // "detected from the model", "--chat-template llama3", "FILE", ...
};

// flag "": the model's template (DetectChatTemplate; ChatML when it has none). A built-in
// name (chatml, llama2, llama3, mistral, gemma, phi3, zephyr) picks that family; anything
// else is read as a file holding a Jinja template and recognised the same way.
// InvalidArgument naming the choices when it is neither a name nor a readable file.
absl::StatusOr<ResolvedTemplate> ResolveChatTemplate(const std::string& flag, const Tokenizer& tok);

}  // namespace pinfer::cli
