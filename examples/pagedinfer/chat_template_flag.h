// --chat-template NAME|FILE (chat, serve): how conversations become prompts. By default the
// model's own Jinja template (tokenizer.chat_template), rendered by the server's Jinja
// interpreter, or the built-in family recognised in it when it uses what the interpreter
// lacks; a built-in name picks that family's C++ formatter; a file is a Jinja template
// rendered the same way.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "examples/pagedinfer/args.h"
#include "loaders/tokenizer.h"
#include "server/chat_formatter.h"

namespace pinfer::cli {

// Registers --chat-template on `args`, writing to *flag.
void RegisterChatTemplateFlag(Args& args, std::string* flag);

struct ResolvedTemplate {
  std::shared_ptr<const server::ChatFormatter> formatter;
  // What is used and why, for the start-up line: "jinja (the model's template)", "built-in
  // llama3 (--chat-template)", "built-in chatml (the Jinja template fails: ...)", ...
  std::string source;
};

// flag "": the model's template (ChatFormatter::ForModel; ChatML when it has none). A
// built-in name (chatml, llama2, llama3, mistral, gemma, phi3, zephyr) picks that family;
// anything else is read as a file holding a Jinja template. InvalidArgument naming the
// choices when it is neither a name nor a readable file.
absl::StatusOr<ResolvedTemplate> ResolveChatTemplate(const std::string& flag, const Tokenizer& tok);

}  // namespace pinfer::cli
