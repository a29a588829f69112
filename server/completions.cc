#include "server/completions.h"

#include <atomic>
#include <ctime>
#include <map>

#include "nlohmann/json.hpp"

namespace pinfer::server {
namespace {

using json = nlohmann::json;

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

json FinishJson(const std::string& reason) { return reason.empty() ? json() : json(reason); }

// An engine refusal at submission, with the parameter it concerns.
ApiError SubmissionError(const absl::Status& s) {
  ApiError e = ErrorFromStatus(s);
  if (e.message.find("max_tokens") != std::string::npos) e.param = "max_tokens";
  if (e.message.find("n = ") == 0) e.param = "n";
  return e;
}

// One request from submission to its last byte. The engine thread only calls OnNotify;
// everything else runs on the connection's I/O thread (Exchange::Post), one call at a time.
class Job : public std::enable_shared_from_this<Job> {
 public:
  Job(std::shared_ptr<http::Exchange> ex, int n, bool chat, bool streamed, bool include_usage,
      std::string model)
      : ex_(std::move(ex)),
        stream_(std::make_shared<RequestStream>(n)),
        chat_(chat),
        streamed_(streamed),
        include_usage_(include_usage),
        model_(std::move(model)),
        created_(static_cast<int64_t>(std::time(nullptr))) {}

  const std::shared_ptr<RequestStream>& stream() const { return stream_; }

  // Engine thread: at most one drain is queued at a time.
  void OnNotify() {
    if (posted_.exchange(true)) return;
    ex_->Post([self = shared_from_this()] {
      self->posted_.store(false);
      self->Drain();
    });
  }

 private:
  void Drain();
  void DrainStreamed(const std::vector<SequenceOutput>& outs, bool done);
  void Answer();
  json Start(const char* object) const {
    return {{"id", (chat_ ? "chatcmpl-" : "cmpl-") + std::to_string(stream_->id())},
            {"object", object},
            {"created", created_},
            {"model", model_}};
  }
  void WriteEvent(const json& j) { ex_->Write(http::SseEvent(j.dump())); }

  const std::shared_ptr<http::Exchange> ex_;
  const std::shared_ptr<RequestStream> stream_;
  const bool chat_, streamed_, include_usage_;
  const std::string model_;
  const int64_t created_;
  std::atomic<bool> posted_{false};
  Collected collected_;
  bool started_ = false;  // the stream's head went out
};

void Job::Drain() {
  std::vector<SequenceOutput> outs;
  stream_->Take(&outs);
  const bool done = stream_->done();
  if (!stream_->accepted()) {
    // Refused at submission (or cancelled, or the server stopped, before the engine took
    // it): nothing was sent yet, so a plain HTTP error.
    if (done) ex_->Respond(ErrorResponse(SubmissionError(stream_->status())));
    return;
  }
  if (streamed_) return DrainStreamed(outs, done);
  for (const SequenceOutput& o : outs) collected_.Add(o);
  if (done) Answer();
}

void Job::Answer() {
  if (absl::Status s = stream_->status(); !s.ok()) {
    return ex_->Respond(ErrorResponse(ErrorFromStatus(s)));
  }
  json body = Start(chat_ ? "chat.completion" : "text_completion");
  body["choices"] = json::array();
  for (const auto& [index, c] : collected_.choices) {
    json choice = {
        {"index", index}, {"logprobs", nullptr}, {"finish_reason", FinishJson(c.finish_reason)}};
    if (chat_) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    body["choices"].push_back(choice);
  }
  body["usage"] = collected_.Usage();
  http::Response r;
  r.body = body.dump();
  ex_->Respond(std::move(r));
}

void Job::DrainStreamed(const std::vector<SequenceOutput>& outs, bool done) {
  const char* object = chat_ ? "chat.completion.chunk" : "text_completion";
  if (!started_) {
    http::Response head;
    head.content_type = "text/event-stream";
    head.Set("Cache-Control", "no-cache");
    ex_->BeginStream(std::move(head));
    started_ = true;
  }
  for (const SequenceOutput& o : outs) {
    collected_.Add(o);
    Choice& c = collected_.choices[o.index];
    json choice = {{"index", o.index}, {"logprobs", nullptr}};
    if (chat_) {
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
    json chunk = Start(object);
    chunk["choices"] = json::array({choice});
    WriteEvent(chunk);
  }
  if (!done) return;
  if (absl::Status s = stream_->status(); !s.ok()) {
    // Too late for an HTTP status: an error event, as OpenAI sends mid-stream, then the end.
    WriteEvent(json::parse(ErrorJson(ErrorFromStatus(s))));
  } else if (include_usage_) {
    json chunk = Start(object);
    chunk["choices"] = json::array();
    chunk["usage"] = collected_.Usage();
    WriteEvent(chunk);
  }
  ex_->Write(http::SseEvent("[DONE]"));
  ex_->End();
}

}  // namespace

http::Response ErrorResponse(const ApiError& e) {
  http::Response r;
  r.status = e.http_status;
  if (e.http_status == 503) r.Set("Retry-After", "1");
  r.body = ErrorJson(e);
  return r;
}

void CompletionsHandler::Handle(std::shared_ptr<http::Exchange> ex, bool chat) {
  ParsedRequest pr;
  if (auto e = ParseRequest(ex->request().body, chat, &pr)) return ex->Respond(ErrorResponse(*e));
  GenerationRequest g;
  g.params = pr.params;
  g.n = pr.n;
  if (chat) {
    g.prompt = chat_encoder_.Encode(FormatChatPieces(tmpl_, pr.messages), special_in_content_);
    g.params.stop.push_back(ChatTemplateEndOfTurn(tmpl_));
  } else if (!pr.prompt_ids.empty()) {
    g.prompt = pr.prompt_ids;
  } else {
    g.prompt = tok_.Encode(pr.prompt, /*add_special=*/true);
  }
  if (g.prompt.empty() && tok_.bos() >= 0) g.prompt.push_back(tok_.bos());
  const int room = max_model_len_ - static_cast<int>(g.prompt.size());
  if (chat && !pr.max_tokens_given && room > 0) g.params.max_tokens = room;
  if (ex->closed()) return;  // the client left while the prompt was tokenized

  auto job = std::make_shared<Job>(ex, pr.n, chat, pr.stream, pr.include_usage,
                                   pr.model.empty() ? model_id_ : pr.model);
  // The stream holds the job until its last notification; the job holds the stream.
  job->stream()->SetNotify([job] { job->OnNotify(); });
  // A client that hangs up (streamed or not) cancels its request and frees its blocks.
  ex->OnClose([worker = &worker_, stream = job->stream()] { worker->Cancel(stream); });
  worker_.Submit(std::move(g), job->stream());
}

}  // namespace pinfer::server
