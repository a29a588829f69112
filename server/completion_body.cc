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

void CompletionBody::EnableTools(ToolSyntax syntax, std::vector<std::string> tool_names) {
  tools_ = chat_;
  syntax_ = syntax;
  tool_names_ = std::move(tool_names);
}

namespace {

json CallJson(const ToolCall& call, const std::string& id) {
  return {{"id", id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

}  // namespace

std::vector<json> CompletionBody::ChatChunks(int index, Choice& c, const std::string& text,
                                             bool first, const SequenceOutput& o) const {
  std::vector<json> out;
  auto chunk = [&](json delta, bool last) {
    json choice = {{"index", index}, {"delta", std::move(delta)}};
    choice["logprobs"] = last ? ChoiceLogprobs(o.logprobs, &c) : json();
    choice["finish_reason"] = last && o.finished ? json(c.finish_reason) : json();
    json ch = head_.Start();
    ch["choices"] = json::array({std::move(choice)});
    out.push_back(std::move(ch));
  };
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (!text.empty() || (first && c.calls.empty())) delta["content"] = text;
  const bool has_delta = !delta.empty() || !o.logprobs.empty();
  if (c.calls.empty()) {
    if (has_delta || o.finished) chunk(std::move(delta), true);
    return out;
  }
  if (has_delta) chunk(std::move(delta), false);
  for (size_t k = 0; k < c.calls.size(); ++k) {  // a call's head, then its arguments
    json head = CallJson(c.calls[k], c.call_ids[k]);
    head["index"] = k;
    head["function"]["arguments"] = "";
    chunk({{"tool_calls", json::array({head})}}, false);
    json args = {{"index", k}, {"function", {{"arguments", c.calls[k].arguments}}}};
    chunk({{"tool_calls", json::array({args})}}, k + 1 == c.calls.size());
  }
  return out;
}

std::vector<json> CompletionBody::Fold(size_t p, const SequenceOutput& o) {
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
  if (tools_) {
    if (!c.tools) c.tools = std::make_shared<ToolAnswer>(tok_, syntax_, tool_names_);
    text = c.tools->Push(o.new_text, o.new_tokens);
    if (o.finished) {
      ParsedAnswer a = c.tools->Finish();
      text += a.content;
      for (ToolCall& call : a.calls) {
        c.call_ids.push_back(RandomId("call_"));
        c.calls.push_back(std::move(call));
      }
    }
  }
  c.started = true;
  c.text += text;
  c.output_tokens = o.output_tokens;
  c.logprobs.insert(c.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
  if (o.finished) c.finish_reason = FinishReasonName(o.reason);
  if (o.finished && !c.calls.empty() && c.finish_reason == "stop") c.finish_reason = "tool_calls";
  if (chat_) return ChatChunks(index, c, text, first, o);
  if (text.empty() && o.logprobs.empty() && !o.finished) return {};
  json choice = {{"index", index}, {"logprobs", ChoiceLogprobs(o.logprobs, &c)}};
  choice["text"] = text;
  choice["finish_reason"] = o.finished ? json(c.finish_reason) : json();
  json chunk = head_.Start();
  chunk["choices"] = json::array({choice});
  return {chunk};
}

json CompletionBody::Message(const Choice& c) const {
  json m = {{"role", "assistant"}};
  m["content"] = c.calls.empty() || !c.text.empty() ? json(c.text) : json();
  if (c.calls.empty()) return m;
  m["tool_calls"] = json::array();
  for (size_t k = 0; k < c.calls.size(); ++k) {
    m["tool_calls"].push_back(CallJson(c.calls[k], c.call_ids[k]));
  }
  return m;
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
      choice["message"] = Message(c);
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
