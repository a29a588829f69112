#include "server/chat_formatter.h"

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/param_error.h"
#include "server/jinja/builtins.h"

namespace pinfer::server {
namespace {

using json = nlohmann::ordered_json;
using jinja::Value;

Value MessageValue(const ChatMessage& m) {
  jinja::DictItems d = {
      {Value::String("role"), Value::String(m.role)},
      {Value::String("content"), m.content_null ? Value::None() : Value::Content(m.content)}};
  if (!m.tool_calls.is_null()) {
    d.push_back({Value::String("tool_calls"), Value::FromJson(m.tool_calls, /*content=*/true)});
  }
  if (!m.tool_call_id.empty()) {
    d.push_back({Value::String("tool_call_id"), Value::Content(m.tool_call_id)});
  }
  if (!m.name.empty()) d.push_back({Value::String("name"), Value::Content(m.name)});
  return Value::MakeDict(std::move(d));
}

// The built-in formatters know system, user and assistant turns: tools go into the system
// message, calls into the assistant's text and results into a user (or Llama 3's ipython)
// turn, in the family's tool syntax.
std::vector<ChatMessage> PlainMessages(const std::vector<ChatMessage>& in, ChatTemplate family,
                                       ToolSyntax syntax, const json& tools) {
  std::vector<ChatMessage> out;
  if (tools.is_array() && !tools.empty()) {
    const std::string text = ToolSystemText(syntax, tools);
    if (!in.empty() && in[0].role == "system") {
      out.push_back({"system", in[0].content + "\n\n" + text});
    } else {
      out.push_back({"system", text});
    }
  }
  for (size_t i = 0; i < in.size(); ++i) {
    const ChatMessage& m = in[i];
    if (i == 0 && !out.empty() && m.role == "system") continue;  // merged above
    if (m.role == "assistant" && !m.tool_calls.is_null()) {
      std::string calls = CallsText(syntax, m.tool_calls);
      out.push_back({"assistant", m.content.empty() ? calls : m.content + "\n" + calls});
    } else if (m.role == "tool") {
      if (family == ChatTemplate::kLlama3) {
        out.push_back({"ipython", m.content});
      } else if (syntax == ToolSyntax::kHermes) {
        out.push_back({"user", "<tool_response>\n" + m.content + "\n</tool_response>"});
      } else {
        out.push_back(
            {"user", "Result of " + (m.name.empty() ? "the call" : m.name) + ": " + m.content});
      }
    } else {
      out.push_back({m.role, m.content});
    }
  }
  return out;
}

std::vector<PromptPiece> Pieces(const jinja::MarkedText& text, size_t skip) {
  std::vector<PromptPiece> out;
  size_t from = skip;
  auto add = [&](size_t to, bool content) {
    if (to > from) out.push_back({text.text().substr(from, to - from), !content});
    from = std::max(from, to);
  };
  for (const auto& [b, e] : text.content()) {
    if (e <= skip) continue;
    add(b, false);
    add(e, true);
  }
  add(text.size(), false);
  return out;
}

}  // namespace

std::shared_ptr<const ChatFormatter> ChatFormatter::BuiltIn(ChatTemplate family) {
  return std::shared_ptr<ChatFormatter>(new ChatFormatter(family, ToolSyntaxFor("", family)));
}

std::shared_ptr<const ChatFormatter> ChatFormatter::FromJinja(const std::string& source,
                                                              const Tokenizer& tok,
                                                              std::string* note,
                                                              jinja::RenderOptions options) {
  const ChatTemplate family = DetectChatTemplate(source);
  std::shared_ptr<ChatFormatter> f(new ChatFormatter(family, ToolSyntaxFor(source, family)));
  f->options_ = options;
  const TokenizerSpec& spec = tok.spec();
  auto text_of = [&](int32_t id) {
    return id >= 0 && id < tok.n_vocab() ? spec.tokens[static_cast<size_t>(id)] : std::string();
  };
  f->bos_text_ = text_of(spec.bos_id);
  f->eos_text_ = text_of(spec.eos_id);
  f->strip_bos_ = spec.add_bos && !f->bos_text_.empty();
  absl::StatusOr<jinja::Template> t = jinja::Template::Parse(source);
  absl::Status probe = t.status();
  if (t.ok()) {
    f->jinja_ = std::move(*t);
    probe = f->RenderJinja({{"user", "Hello"}}, json(), json()).status();
  }
  if (probe.ok()) {
    *note = "jinja";
    return f;
  }
  f->jinja_.reset();
  *note = absl::StrCat("built-in ", ChatTemplateName(family),
                       " (the Jinja template fails: ", probe.message(), ")");
  return f;
}

std::shared_ptr<const ChatFormatter> ChatFormatter::ForModel(const Tokenizer& tok,
                                                             std::string* note) {
  const std::string& source = tok.spec().chat_template;
  if (source.empty()) {
    *note = "built-in chatml (the model has no chat template)";
    return BuiltIn(ChatTemplate::kChatMl);
  }
  auto f = FromJinja(source, tok, note);
  *note += ", from the model's tokenizer.chat_template";
  return f;
}

std::string ChatFormatter::Describe() const {
  return jinja_ ? "jinja" : absl::StrCat("built-in ", ChatTemplateName(family_));
}

absl::StatusOr<std::vector<PromptPiece>> ChatFormatter::RenderJinja(
    const std::vector<ChatMessage>& messages, const json& tools, const json& kwargs) const {
  jinja::List msgs;
  for (const ChatMessage& m : messages) msgs.push_back(MessageValue(m));
  jinja::DictItems ctx;
  if (kwargs.is_object()) {  // first, so that the names below win
    for (const auto& [k, v] : kwargs.items()) {
      ctx.push_back({Value::String(k), Value::FromJson(v, /*content=*/true)});
    }
  }
  ctx.push_back({Value::String("messages"), Value::MakeList(std::move(msgs))});
  ctx.push_back({Value::String("tools"), tools.is_array() && !tools.empty()
                                             ? Value::FromJson(tools, /*content=*/true)
                                             : Value::None()});
  ctx.push_back({Value::String("add_generation_prompt"), Value::Bool(true)});
  ctx.push_back({Value::String("bos_token"), Value::String(bos_text_)});
  ctx.push_back({Value::String("eos_token"), Value::String(eos_text_)});
  auto out = jinja_->RenderMarked(Value::MakeDict(std::move(ctx)), options_);
  if (!out.ok()) return out.status();
  // The tokenizer adds BOS itself: a BOS the template wrote (as its own text) goes.
  const bool lead_bos = strip_bos_ && absl::StartsWith(out->text(), bos_text_) &&
                        (out->content().empty() || out->content()[0].first >= bos_text_.size());
  return Pieces(*out, lead_bos ? bos_text_.size() : 0);
}

std::vector<PromptPiece> ChatFormatter::FormatBuiltIn(const std::vector<ChatMessage>& messages,
                                                      const json& tools) const {
  return FormatChatPieces(family_, PlainMessages(messages, family_, syntax_, tools));
}

absl::StatusOr<std::vector<PromptPiece>> ChatFormatter::Format(
    const std::vector<ChatMessage>& messages, const json& tools, const json& kwargs) const {
  if (!jinja_) return FormatBuiltIn(messages, tools);
  auto pieces = RenderJinja(messages, tools, kwargs);
  if (pieces.ok()) return pieces;
  const absl::Status& s = pieces.status();
  if (absl::IsUnimplemented(s)) {
    if (!fallback_logged_.exchange(true)) {
      std::fprintf(stderr,
                   "chat template: %s; this conversation (and any other that needs it) is "
                   "formatted with the built-in %s template instead\n",
                   std::string(s.message()).c_str(), ChatTemplateName(family_));
    }
    return FormatBuiltIn(messages, tools);
  }
  if (absl::IsFailedPrecondition(s)) {  // raise_exception: the template's own words
    std::string msg(s.message());
    if (absl::StartsWith(msg, jinja::kRaisedPrefix)) msg.erase(0, sizeof(jinja::kRaisedPrefix) - 1);
    return InvalidParamError("messages",
                             absl::StrCat("the chat template refused the messages: ", msg));
  }
  return InvalidParamError(
      "messages", absl::StrCat("the chat template failed on these messages: ", s.message()));
}

}  // namespace pinfer::server
