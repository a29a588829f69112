#include "examples/pagedinfer/chat_template_flag.h"

#include "absl/strings/str_cat.h"
#include "examples/pagedinfer/read_text.h"

namespace pinfer::cli {
namespace {

constexpr server::ChatTemplate kAll[] = {
    server::ChatTemplate::kChatMl,  server::ChatTemplate::kLlama2, server::ChatTemplate::kLlama3,
    server::ChatTemplate::kMistral, server::ChatTemplate::kGemma,  server::ChatTemplate::kPhi3,
    server::ChatTemplate::kZephyr};

std::string Names() {
  std::string out;
  for (server::ChatTemplate t : kAll) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", server::ChatTemplateName(t));
  }
  return out;
}

}  // namespace

void RegisterChatTemplateFlag(Args& args, std::string* flag) {
  args.Add("--chat-template", flag,
           absl::StrCat("chat template: a built-in name (", Names(),
                        ") or a file holding a Jinja template (default: the model's own, "
                        "rendered as Jinja)"));
}

absl::StatusOr<ResolvedTemplate> ResolveChatTemplate(const std::string& flag,
                                                     const Tokenizer& tok) {
  ResolvedTemplate r;
  if (flag.empty()) {
    r.formatter = server::ChatFormatter::ForModel(tok, &r.source);
    return r;
  }
  for (server::ChatTemplate t : kAll) {
    if (flag == server::ChatTemplateName(t)) {
      r.formatter = server::ChatFormatter::BuiltIn(t);
      r.source = absl::StrCat("built-in ", flag, " (--chat-template)");
      return r;
    }
  }
  absl::StatusOr<std::string> text = ReadTextFile(flag);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--chat-template '", flag,
                                                   "' is neither a built-in template (", Names(),
                                                   ") nor a readable file"));
  }
  std::string note;
  r.formatter = server::ChatFormatter::FromJinja(*text, tok, &note);
  r.source = absl::StrCat(note, ", from ", flag);
  return r;
}

}  // namespace pinfer::cli
