#include "server/completion_body.h"

#include "server/response_json.h"

namespace pinfer::server {

using json = nlohmann::json;

json ResponseHead::Start() const {
  return {{"id", id},
          {"object", object},
          {"created", created},
          {"model", model},
          {"system_fingerprint", system_fingerprint}};
}

CompletionBody::CompletionBody(const Tokenizer& tok, const ParsedRequest& request,
                               ResponseHead head, std::vector<std::string> prompt_texts)
    : tok_(tok),
      chat_(request.chat),
      echo_(request.echo),
      want_logprobs_(request.params.logprobs >= 0),
      n_(request.n),
      head_(std::move(head)),
      prompt_texts_(std::move(prompt_texts)) {}

json CompletionBody::ChoiceLogprobs(const std::vector<SampledLogprobs>& lps, Choice* c) const {
  if (!want_logprobs_) return nullptr;
  return chat_ ? ChatLogprobs(tok_, lps) : CompletionLogprobs(tok_, lps, &c->text_offset);
}

json CompletionBody::Fold(size_t p, const SequenceOutput& o) {
  const int index = static_cast<int>(p) * n_ + o.index;
  Choice& c = choices_[index];
  prompt_tokens_[p] = o.prompt_tokens;
  cached_tokens_[p] = o.cached_prompt_tokens;
  const bool first = !c.started;
  std::string text = o.new_text;
  if (first && echo_) {
    text = prompt_texts_[p] + text;
    c.text_offset = prompt_texts_[p].size();
  }
  c.started = true;
  c.text += text;
  c.output_tokens = o.output_tokens;
  c.logprobs.insert(c.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
  if (o.finished) c.finish_reason = FinishReasonName(o.reason);
  if (text.empty() && o.logprobs.empty() && !o.finished && !(chat_ && first)) return nullptr;
  json choice = {{"index", index}, {"logprobs", ChoiceLogprobs(o.logprobs, &c)}};
  if (chat_) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  choice["finish_reason"] = o.finished ? json(c.finish_reason) : json();
  json chunk = head_.Start();
  chunk["choices"] = json::array({choice});
  return chunk;
}

json CompletionBody::Usage() const {
  int64_t prompt = 0, cached = 0, completion = 0;
  for (const auto& [p, n] : prompt_tokens_) prompt += n;
  for (const auto& [p, n] : cached_tokens_) cached += n;
  for (const auto& [i, c] : choices_) completion += c.output_tokens;
  return UsageJson(prompt, completion, cached);
}

json CompletionBody::Body() const {
  json body = head_.Start();
  body["choices"] = json::array();
  for (const auto& [index, c] : choices_) {
    Choice copy = c;
    copy.text_offset = echo_ ? prompt_texts_[static_cast<size_t>(index / n_)].size() : 0;
    json choice = {{"index", index},
                   {"logprobs", ChoiceLogprobs(c.logprobs, &copy)},
                   {"finish_reason", c.finish_reason.empty() ? json() : json(c.finish_reason)}};
    if (chat_) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    body["choices"].push_back(std::move(choice));
  }
  body["usage"] = Usage();
  return body;
}

json CompletionBody::UsageChunk() const {
  json chunk = head_.Start();
  chunk["choices"] = json::array();
  chunk["usage"] = Usage();
  return chunk;
}

}  // namespace pinfer::server
