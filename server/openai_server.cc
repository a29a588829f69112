#include "server/openai_server.h"

#include <ctime>

#include "nlohmann/json.hpp"
#include "server/auth.h"
#include "server/completions.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace pinfer::server {

using json = nlohmann::json;

namespace {

// The HTTP layer's own refusals in OpenAI's error shape.
http::Response ApiErrorPage(int status, const std::string& message) {
  ApiError e;
  e.http_status = status;
  e.message = message;
  switch (status) {
    case 404:
      e.code = "not_found";
      break;
    case 405:
      e.code = "method_not_allowed";
      break;
    case 413:
      e.code = "request_too_large";
      break;
    case 415:
      e.code = "unsupported_media_type";
      break;
    case 431:
      e.code = "headers_too_large";
      break;
    case 503:
      e.type = "server_unavailable";
      e.code = "unavailable";
      break;
    default:
      break;
  }
  return ErrorResponse(e);
}

http::Response JsonResponse(std::string body) {
  http::Response r;
  r.body = std::move(body);
  return r;
}

}  // namespace

class OpenAiServer::Handlers {
 public:
  Handlers(Engine& engine, EngineWorker& worker, const ServerOptions& options, ChatTemplate t)
      : worker_(worker),
        options_(options),
        completions_(engine.model().tokenizer(), engine.config().max_model_len, worker, t,
                     options.model_id, options.special_in_content),
        created_(static_cast<int64_t>(std::time(nullptr))) {}

  void SetHttp(const http::Server* http) { http_ = http; }

  http::Router Routes() {
    http::Router r;
    using http::RunOn;
    r.Add("POST", "/v1/completions",
          Authorized([this](auto ex) { completions_.Handle(ex, false); }), RunOn::kHandlerPool);
    r.Add("POST", "/v1/chat/completions",
          Authorized([this](auto ex) { completions_.Handle(ex, true); }), RunOn::kHandlerPool);
    r.Add(
        "GET", "/health", [](auto ex) { ex->Respond(JsonResponse(R"({"status":"ok"})")); },
        RunOn::kIoThread);
    r.Add("GET", "/v1/models", Authorized([this](auto ex) { ex->Respond(JsonResponse(Models())); }),
          RunOn::kIoThread);
    r.Add(
        "GET", "/metrics",
        [this](auto ex) {
          http::Response res;
          res.content_type = "text/plain; version=0.0.4";
          const WorkerSnapshot s = worker_.snapshot();
          res.body = PrometheusText(s.stats, s.kv, s.counters) + HttpMetricsText(http_->stats());
          ex->Respond(std::move(res));
        },
        RunOn::kIoThread);
    r.Add("GET", "/v1/memory", Authorized([this](auto ex) {
            ex->Respond(JsonResponse("{\"ledger\":" + worker_.ledger_json() +
                                     ",\"kv\":" + worker_.snapshot().kv.ToJson() + "}"));
          }),
          RunOn::kIoThread);
    r.SetFallback([](std::shared_ptr<http::Exchange> ex) {
      const http::Request& req = ex->request();
      ex->Respond(ApiErrorPage(404, "no such endpoint: " + req.method + " " + req.path));
    });
    return r;
  }

 private:
  // With --api-key, every /v1/ endpoint needs "Authorization: Bearer KEY".
  http::Handler Authorized(http::Handler h) const {
    if (options_.api_key.empty()) return h;
    return [this, h = std::move(h)](std::shared_ptr<http::Exchange> ex) {
      const std::optional<std::string_view> auth = ex->request().Header("Authorization");
      const std::string_view* header = auth ? &*auth : nullptr;
      if (BearerMatches(header, options_.api_key)) return h(std::move(ex));
      ApiError e;
      e.http_status = 401;
      e.message =
          auth ? "incorrect API key provided" : "missing API key (Authorization: Bearer KEY)";
      e.code = "invalid_api_key";
      ex->Respond(ErrorResponse(e));
    };
  }

  std::string Models() const {
    json model = {{"id", options_.model_id},
                  {"object", "model"},
                  {"created", created_},
                  {"owned_by", "pagedinfer"}};
    return json{{"object", "list"}, {"data", json::array({model})}}.dump();
  }

  EngineWorker& worker_;
  const ServerOptions& options_;
  CompletionsHandler completions_;
  const int64_t created_;
  const http::Server* http_ = nullptr;  // set before the server runs
};

OpenAiServer::OpenAiServer(Engine& engine, ServerOptions options)
    : engine_(engine), options_(std::move(options)) {
  template_ = options_.chat_template.value_or(
      DetectChatTemplate(engine.model().tokenizer().spec().chat_template));
  worker_ = std::make_unique<EngineWorker>(engine_);
  handlers_ = std::make_unique<Handlers>(engine_, *worker_, options_, template_);
  http::ServerConfig hc;
  hc.limits = options_.limits;
  hc.io_threads = options_.http_threads;
  hc.handler_threads = options_.handler_threads;
  hc.error_page = ApiErrorPage;
  http_ = std::make_unique<http::Server>(handlers_->Routes(), std::move(hc));
  handlers_->SetHttp(http_.get());  // /metrics shows the HTTP layer's figures too
}

OpenAiServer::~OpenAiServer() {
  Stop();
  // The engine thread ends (failing what is left) while the HTTP objects still exist, so its
  // last notifications find them; then the HTTP server (its handler pool first) goes.
  worker_.reset();
  http_.reset();
  handlers_.reset();
}

absl::StatusOr<int> OpenAiServer::Bind() { return http_->Bind(options_.host, options_.port); }

void OpenAiServer::Listen() { http_->Run(); }

bool OpenAiServer::Shutdown(std::chrono::milliseconds timeout) {
  http_->BeginShutdown();
  const bool drained = http_->WaitForIdle(timeout);
  // What is still running now ends with 503 (or a stream's error event); what is still to
  // come is refused the same way.
  worker_->Close(absl::UnavailableError(
      drained ? "the server is shutting down"
              : "the server is shutting down (--shutdown-timeout passed before this request "
                "finished)"));
  return drained || http_->WaitForIdle(std::chrono::seconds(5));
}

void OpenAiServer::Stop() {
  if (http_) http_->Stop();
}

}  // namespace pinfer::server
