#include "server/completions.h"

#include <atomic>
#include <cstdio>
#include <ctime>

#include "absl/strings/str_join.h"
#include "engine/param_error.h"
#include "nlohmann/json.hpp"
#include "server/completion_body.h"
#include "server/request_json.h"
#include "server/response_json.h"

namespace pinfer::server {
namespace {

using json = nlohmann::json;

// One HTTP request from submission to its last byte: one engine request per prompt. The
// engine thread only calls OnNotify; everything else runs on the connection's I/O thread
// (Exchange::Post), one call at a time.
class Job : public std::enable_shared_from_this<Job> {
 public:
  Job(std::shared_ptr<http::Exchange> ex, EngineWorker* worker, CompletionBody body, size_t prompts,
      int n, bool streamed, bool include_usage, http::Response head)
      : ex_(std::move(ex)),
        worker_(worker),
        body_(std::move(body)),
        streamed_(streamed),
        include_usage_(include_usage),
        head_(std::move(head)) {
    for (size_t p = 0; p < prompts; ++p) streams_.push_back(std::make_shared<RequestStream>(n));
  }

  const std::vector<std::shared_ptr<RequestStream>>& streams() const { return streams_; }

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
  void Stream(const std::vector<json>& chunks, bool done);
  void Answer();
  absl::Status Failure() const {  // the first stream's error, if any
    for (const auto& s : streams_) {
      if (absl::Status st = s->status(); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  const std::shared_ptr<http::Exchange> ex_;
  EngineWorker* const worker_;
  CompletionBody body_;
  std::vector<std::shared_ptr<RequestStream>> streams_;
  const bool streamed_, include_usage_;
  http::Response head_;  // status 200, content type and extra headers of the answer
  std::atomic<bool> posted_{false};
  bool started_ = false;  // the stream's head went out
  bool over_ = false;     // the answer is complete
};

void Job::Drain() {
  if (over_) return;
  bool done = true, accepted = true;
  std::vector<json> chunks;
  for (size_t p = 0; p < streams_.size(); ++p) {
    std::vector<SequenceOutput> outs;
    streams_[p]->Take(&outs);
    for (const SequenceOutput& o : outs) {
      for (json& chunk : body_.Fold(p, o)) chunks.push_back(std::move(chunk));
    }
    done &= streams_[p]->done();
    accepted &= streams_[p]->accepted();
  }
  const absl::Status failed = Failure();
  if (!started_ && !failed.ok() && (!accepted || !streamed_)) {
    // Refused at submission (or cancelled, or the server stopped) before anything was sent:
    // a plain HTTP error, and the other prompts' requests end too.
    over_ = true;
    for (const auto& stream : streams_) worker_->Cancel(stream);
    ex_->Respond(ErrorResponse(ErrorFromStatus(failed)));
    return;
  }
  if (!accepted && !done) return;  // wait until every prompt is in
  if (streamed_) return Stream(chunks, done || !failed.ok());
  if (done) Answer();
}

void Job::Answer() {
  over_ = true;
  http::Response r = head_;
  r.body = body_.Body().dump();
  ex_->Respond(std::move(r));
}

void Job::Stream(const std::vector<json>& chunks, bool done) {
  if (!started_) {
    http::Response head = head_;
    head.content_type = "text/event-stream";
    head.Set("Cache-Control", "no-cache");
    ex_->BeginStream(std::move(head));
    started_ = true;
  }
  for (const json& chunk : chunks) ex_->Write(http::SseEvent(chunk.dump()));
  if (!done) return;
  over_ = true;
  if (absl::Status s = Failure(); !s.ok()) {
    for (const auto& stream : streams_) worker_->Cancel(stream);
    // Too late for an HTTP status: an error event, as OpenAI sends mid-stream, then the end.
    ex_->Write(http::SseEvent(ErrorJson(ErrorFromStatus(s))));
  } else if (include_usage_) {
    ex_->Write(http::SseEvent(body_.UsageChunk().dump()));
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

std::optional<ApiError> CompletionsHandler::ForcedCall(const ParsedRequest& pr,
                                                       GenerationRequest* g) const {
  if (pr.tool_choice != ToolChoice::kRequired && pr.tool_choice != ToolChoice::kFunction) {
    return std::nullopt;
  }
  if (pr.grammar) {
    return request_json::Bad(pr.grammar_field, "tool_choice forces a tool call; " +
                                                   pr.grammar_field +
                                                   " cannot constrain the same answer");
  }
  std::vector<ToolSpec> specs;
  for (const ToolSpec& t : pr.tool_specs) {
    if (pr.tool_choice == ToolChoice::kRequired || t.name == pr.tool_function) specs.push_back(t);
  }
  // A named function is called once (as vLLM does); "required" may call several when
  // parallel_tool_calls allows it.
  const bool several = pr.tool_choice == ToolChoice::kRequired && pr.parallel_tool_calls;
  auto gbnf = ForcedCallGbnf(formatter_->tool_syntax(), specs, several);
  if (!gbnf.ok()) return ErrorFromStatus(gbnf.status());  // names "tools"
  auto compiled = grammar::CompileGrammar(*gbnf);
  if (!compiled.ok()) {
    return ErrorFromStatus(InvalidParamError("tools", std::string(compiled.status().message())));
  }
  g->grammar = std::move(*compiled);
  return std::nullopt;
}

std::optional<ApiError> CompletionsHandler::EngineRequests(
    const ParsedRequest& pr, std::vector<GenerationRequest>* out,
    std::vector<std::string>* prompt_texts) const {
  auto add = [&](std::vector<int32_t> prompt) {
    GenerationRequest g;
    g.params = pr.params;
    g.n = pr.n;
    g.grammar = pr.grammar;
    g.prompt = std::move(prompt);
    if (g.prompt.empty() && tok_.bos() >= 0) g.prompt.push_back(tok_.bos());
    const int room = max_model_len_ - static_cast<int>(g.prompt.size());
    if (pr.chat && !pr.max_tokens_given && room > 0) g.params.max_tokens = room;
    out->push_back(std::move(g));
  };
  if (pr.chat) {
    auto pieces = formatter_->Format(pr.messages, pr.tools, pr.chat_template_kwargs);
    if (!pieces.ok()) return ErrorFromStatus(pieces.status());  // names "messages"
    add(chat_encoder_.Encode(*pieces, special_in_content_));
    out->back().params.stop.push_back(ChatTemplateEndOfTurn(formatter_->family()));
    return ForcedCall(pr, &out->back());
  }
  for (const PromptInput& p : pr.prompts) {
    prompt_texts->push_back(p.is_ids ? tok_.Decode(p.ids) : p.text);
    add(p.is_ids ? p.ids : tok_.Encode(p.text, /*add_special=*/true));
  }
  return std::nullopt;
}

void CompletionsHandler::Handle(std::shared_ptr<http::Exchange> ex, bool chat) {
  ParsedRequest pr;
  if (auto e = ParseRequest(ex->request().body, chat, &pr)) return ex->Respond(ErrorResponse(*e));
  http::Response head;
  if (!pr.ignored.empty()) {
    const std::string names = absl::StrJoin(pr.ignored, ", ");
    head.Set("X-Ignored-Fields", names);
    std::fprintf(stderr, "%s: fields present in the request but ignored: %s\n",
                 chat ? "/v1/chat/completions" : "/v1/completions", names.c_str());
  }
  std::vector<std::string> prompt_texts;
  std::vector<GenerationRequest> requests;
  if (auto e = EngineRequests(pr, &requests, &prompt_texts)) {
    return ex->Respond(ErrorResponse(*e));
  }
  // The request's own faults are answered now, without waiting for the engine's step.
  for (const GenerationRequest& g : requests) {
    if (absl::Status s = engine_.Validate(g); !s.ok()) {
      return ex->Respond(ErrorResponse(ErrorFromStatus(s)));
    }
  }
  if (ex->closed()) return;  // the client left while the prompt was tokenized

  ResponseHead rh;
  rh.id = RandomId(chat ? "chatcmpl-" : "cmpl-");
  rh.object = chat ? (pr.stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  rh.model = model_id_;  // the served model's own id, whatever the client named
  rh.system_fingerprint = fingerprint_;
  rh.created = static_cast<int64_t>(std::time(nullptr));
  CompletionBody body(tok_, pr, rh, std::move(prompt_texts));
  if (pr.chat && pr.tool_choice != ToolChoice::kNone) {
    std::vector<std::string> names;
    for (const ToolSpec& t : pr.tool_specs) names.push_back(t.name);
    body.EnableTools(formatter_->tool_syntax(), std::move(names));
  }
  auto job = std::make_shared<Job>(ex, &worker_, std::move(body), requests.size(), pr.n, pr.stream,
                                   pr.include_usage, std::move(head));
  // Each stream holds the job until its last notification; the job holds the streams.
  for (const auto& s : job->streams()) s->SetNotify([job] { job->OnNotify(); });
  // A client that hangs up (streamed or not) cancels its requests and frees their blocks.
  ex->OnClose([worker = &worker_, streams = job->streams()] {
    for (const auto& s : streams) worker->Cancel(s);
  });
  for (size_t p = 0; p < requests.size(); ++p) {
    worker_.Submit(std::move(requests[p]), job->streams()[p]);
  }
}

}  // namespace pinfer::server
