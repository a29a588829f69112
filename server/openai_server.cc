#include "server/openai_server.h"

#include <cstdio>
#include <ctime>

#include "nlohmann/json.hpp"
#include "server/auth.h"
#include "server/completions.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/response_json.h"
#include "server/tokenize.h"

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

// CORS (--allowed-origins): the origin of a request when the list allows it, else "".
std::string AllowedOrigin(const std::vector<std::string>& allowed, const http::Request& req) {
  const std::optional<std::string_view> origin = req.Header("Origin");
  if (allowed.empty() || !origin) return "";
  for (const std::string& o : allowed) {
    if (o == "*" || o == *origin) return std::string(*origin);
  }
  return "";
}

// The answer to a CORS preflight (OPTIONS) from an allowed origin; it needs no key.
http::Response Preflight(const http::Request& req) {
  http::Response r;
  r.status = 204;
  r.content_type = "";
  r.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  const std::optional<std::string_view> asked = req.Header("Access-Control-Request-Headers");
  r.Set("Access-Control-Allow-Headers",
        asked ? std::string(*asked) : std::string("Authorization, Content-Type"));
  r.Set("Access-Control-Max-Age", "600");
  return r;
}

// A body-in, body-out handler (tokenize, detokenize) as a route.
template <typename Fn>
http::Handler BodyHandler(Fn fn) {
  return [fn](std::shared_ptr<http::Exchange> ex) {
    std::string out;
    if (auto e = fn(ex->request().body, &out)) return ex->Respond(ErrorResponse(*e));
    ex->Respond(JsonResponse(std::move(out)));
  };
}

}  // namespace

class OpenAiServer::Handlers {
 public:
  Handlers(Engine& engine, EngineWorker& worker, const ServerOptions& options,
           std::shared_ptr<const ChatFormatter> formatter)
      : engine_(engine),
        worker_(worker),
        options_(options),
        completions_(engine, worker, std::move(formatter), options.model_id,
                     SystemFingerprint(engine.model().path(), engine.model().WeightFormat(),
                                       std::string(KvDtypeName(engine.config().kv_dtype))),
                     options.special_in_content),
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
          res.body = PrometheusText(worker_.snapshot(), engine_.ledger(), options_.model_id) +
                     HttpMetricsText(http_->stats());
          ex->Respond(std::move(res));
        },
        RunOn::kIoThread);
    r.Add("GET", "/v1/memory", Authorized([this](auto ex) {
            ex->Respond(JsonResponse("{\"ledger\":" + worker_.ledger_json() +
                                     ",\"kv\":" + worker_.snapshot().kv.ToJson() + "}"));
          }),
          RunOn::kIoThread);
    AddTokenizeRoutes(r);
    r.SetFallback([this](std::shared_ptr<http::Exchange> ex) {
      const http::Request& req = ex->request();
      if (req.method == "OPTIONS" && !AllowedOrigin(options_.allowed_origins, req).empty()) {
        return ex->Respond(Preflight(req));
      }
      ex->Respond(ApiErrorPage(404, "no such endpoint: " + req.method + " " + req.path));
    });
    return r;
  }

  // CORS headers on every answer to an allowed origin (http::ServerConfig::decorate).
  void Decorate(const http::Request& req, http::Response& res) const {
    const std::string origin = AllowedOrigin(options_.allowed_origins, req);
    if (origin.empty()) return;
    res.Set("Access-Control-Allow-Origin", origin);
    res.Set("Vary", "Origin");
  }

 private:
  // /tokenize and /detokenize, in llama-server's shapes (server/tokenize.h).
  void AddTokenizeRoutes(http::Router& r) {
    const Tokenizer* tok = &engine_.model().tokenizer();
    const int max_len = engine_.config().max_model_len;
    r.Add("POST", "/tokenize",
          BodyHandler([tok, max_len](const std::string& body, std::string* out) {
            return TokenizeBody(body, *tok, max_len, out);
          }));
    r.Add("POST", "/detokenize", BodyHandler([tok](const std::string& body, std::string* out) {
            return DetokenizeBody(body, *tok, out);
          }));
  }

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
                  {"owned_by", "pagedinfer"},
                  {"max_model_len", engine_.config().max_model_len}};
    return json{{"object", "list"}, {"data", json::array({model})}}.dump();
  }

  const Engine& engine_;
  EngineWorker& worker_;
  const ServerOptions& options_;
  CompletionsHandler completions_;
  const int64_t created_;
  const http::Server* http_ = nullptr;  // set before the server runs
};

OpenAiServer::OpenAiServer(Engine& engine, ServerOptions options)
    : engine_(engine), options_(std::move(options)) {
  formatter_ = options_.chat_formatter;
  if (!formatter_) {
    std::string note;
    formatter_ = ChatFormatter::ForModel(engine.model().tokenizer(), &note);
    std::fprintf(stderr, "chat template: %s\n", note.c_str());
  }
  worker_ = std::make_unique<EngineWorker>(engine_);
  handlers_ = std::make_unique<Handlers>(engine_, *worker_, options_, formatter_);
  http::ServerConfig hc;
  hc.limits = options_.limits;
  hc.io_threads = options_.http_threads;
  hc.handler_threads = options_.handler_threads;
  hc.error_page = ApiErrorPage;
  if (!options_.allowed_origins.empty()) {
    hc.decorate = [h = handlers_.get()](const http::Request& req, http::Response& res) {
      h->Decorate(req, res);
    };
  }
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
