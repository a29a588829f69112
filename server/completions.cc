#include "server/completions.h"

#include <httplib.h>

#include <atomic>
#include <ctime>
#include <map>

#include "nlohmann/json.hpp"
#include "server/openai_request.h"

namespace pinfer::server {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

// Per-choice results collected across steps.
struct Choice {
  std::string text;
  std::string finish_reason;
  int output_tokens = 0;
  bool started = false;  // streaming: the role chunk went out
};

struct Collected {
  std::map<int, Choice> choices;
  int prompt_tokens = 0;

  void Add(const SequenceOutput& o) {
    Choice& c = choices[o.index];
    c.text += o.new_text;
    c.output_tokens = o.output_tokens;
    if (o.finished) c.finish_reason = FinishReasonName(o.reason);
    prompt_tokens = o.prompt_tokens;
  }
  json Usage() const {
    int completion = 0;
    for (const auto& [i, c] : choices) completion += c.output_tokens;
    return {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion},
            {"total_tokens", prompt_tokens + completion}};
  }
};

struct ResponseHead {
  std::string id, object, model;
  int64_t created;
  json Start() const {
    return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
  }
};

json FinishJson(const std::string& reason) { return reason.empty() ? json() : json(reason); }

// The state one streamed response keeps between calls of its content provider.
struct StreamState {
  std::shared_ptr<RequestStream> stream;
  ResponseHead head;
  bool chat = false, include_usage = false;
  Collected collected;
  std::atomic<bool> finished{false};
};

bool WriteEvent(httplib::DataSink& sink, const std::string& data) {
  const std::string event = "data: " + data + "\n\n";
  return sink.write(event.data(), event.size());
}

// One call: wait up to a second for outputs and send them as chunks; at the end [DONE].
bool StreamOnce(StreamState& st, httplib::DataSink& sink) {
  std::vector<SequenceOutput> outs;
  if (!st.stream->Wait(&outs, milliseconds(1000))) {
    // Nothing new (queued or a slow step): an SSE comment keeps the connection checked, so a
    // client that left is noticed (the write fails) and its request cancelled.
    static const std::string kPing = ": keep-alive\n\n";
    return sink.write(kPing.data(), kPing.size());
  }
  for (const SequenceOutput& o : outs) {
    st.collected.Add(o);
    Choice& c = st.collected.choices[o.index];
    json choice = {{"index", o.index}, {"logprobs", nullptr}};
    if (st.chat) {
      json delta = json::object();
      if (!c.started) delta["role"] = "assistant";
      if (!o.new_text.empty() || !c.started) delta["content"] = o.new_text;
      c.started = true;
      if (delta.empty() && !o.finished) continue;
      choice["delta"] = delta;
    } else {
      if (o.new_text.empty() && !o.finished) continue;
      choice["text"] = o.new_text;
    }
    choice["finish_reason"] = o.finished ? FinishJson(c.finish_reason) : json();
    json chunk = st.head.Start();
    chunk["choices"] = json::array({choice});
    if (!WriteEvent(sink, chunk.dump())) return false;
  }
  if (!st.stream->done()) return true;
  if (absl::Status s = st.stream->status(); !s.ok()) {
    // Too late for an HTTP status: an error event, as OpenAI sends mid-stream.
    ApiError e = ErrorFromStatus(s);
    WriteEvent(sink, json::parse(ErrorJson(e)).dump());
    st.finished = true;
    return false;
  }
  if (st.include_usage) {
    json chunk = st.head.Start();
    chunk["choices"] = json::array();
    chunk["usage"] = st.collected.Usage();
    if (!WriteEvent(sink, chunk.dump())) return false;
  }
  st.finished = true;
  if (!WriteEvent(sink, "[DONE]")) return false;
  sink.done();
  return true;
}

}  // namespace

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  if (e.http_status == 503) res.set_header("Retry-After", "1");
  res.set_content(ErrorJson(e), "application/json");
}

void CompletionsHandler::Handle(const httplib::Request& req, httplib::Response& res, bool chat) {
  ParsedRequest pr;
  if (auto e = ParseRequest(req.body, chat, &pr)) return SendError(res, *e);
  GenerationRequest g;
  g.params = pr.params;
  g.n = pr.n;
  if (chat) {
    const std::string text = FormatChat(tmpl_, pr.messages);
    g.prompt = tok_.Encode(text, /*add_special=*/true, /*parse_special=*/true);
    g.params.stop.push_back(ChatTemplateEndOfTurn(tmpl_));
  } else if (!pr.prompt_ids.empty()) {
    g.prompt = pr.prompt_ids;
  } else {
    g.prompt = tok_.Encode(pr.prompt, /*add_special=*/true);
  }
  if (g.prompt.empty() && tok_.bos() >= 0) g.prompt.push_back(tok_.bos());
  const int room = max_model_len_ - static_cast<int>(g.prompt.size());
  if (chat && !pr.max_tokens_given && room > 0) g.params.max_tokens = room;
  absl::StatusOr<std::shared_ptr<RequestStream>> stream = worker_.Submit(std::move(g));
  if (!stream.ok()) {
    ApiError e = ErrorFromStatus(stream.status());
    if (e.message.find("max_tokens") != std::string::npos) e.param = "max_tokens";
    if (e.message.find("n = ") == 0) e.param = "n";
    return SendError(res, e);
  }
  ResponseHead head;
  head.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string((*stream)->id());
  head.object = chat ? "chat.completion" : "text_completion";
  head.model = pr.model.empty() ? model_id_ : pr.model;
  head.created = static_cast<int64_t>(std::time(nullptr));

  if (pr.stream) {
    auto st = std::make_shared<StreamState>();
    st->stream = *stream;
    st->head = head;
    if (chat) st->head.object = "chat.completion.chunk";
    st->chat = chat;
    st->include_usage = pr.include_usage;
    EngineWorker* worker = &worker_;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [st](size_t, httplib::DataSink& sink) { return StreamOnce(*st, sink); },
        [st, worker](bool) {
          // The client left (or the connection broke) before the end: free its blocks.
          if (!st->finished) worker->Cancel(st->stream->id());
        });
    return;
  }

  Collected collected;
  while (true) {
    std::vector<SequenceOutput> outs;
    (*stream)->Wait(&outs, milliseconds(1000));
    for (const SequenceOutput& o : outs) collected.Add(o);
    if ((*stream)->done()) break;
  }
  if (absl::Status s = (*stream)->status(); !s.ok()) return SendError(res, ErrorFromStatus(s));
  json body = head.Start();
  body["choices"] = json::array();
  for (const auto& [index, c] : collected.choices) {
    json choice = {
        {"index", index}, {"logprobs", nullptr}, {"finish_reason", FinishJson(c.finish_reason)}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    body["choices"].push_back(choice);
  }
  body["usage"] = collected.Usage();
  res.set_content(body.dump(), "application/json");
}

}  // namespace pinfer::server
