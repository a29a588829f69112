#include "server/openai_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <ctime>

#include "nlohmann/json.hpp"
#include "server/completions.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace pinfer::server {

using json = nlohmann::json;

class OpenAiServer::Handlers {
 public:
  Handlers(Engine& engine, EngineWorker& worker, const ServerOptions& options, ChatTemplate t)
      : worker_(worker),
        options_(options),
        completions_(engine.model().tokenizer(), engine.config().max_model_len, worker, t,
                     options.model_id),
        created_(static_cast<int64_t>(std::time(nullptr))) {}

  void Install(httplib::Server& http) {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      return Authorize(req, res) ? httplib::Server::HandlerResponse::Unhandled
                                 : httplib::Server::HandlerResponse::Handled;
    });
    // httplib's own refusals (413 for a body over --max-body, 404, ...) in OpenAI's shape.
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      ApiError e;
      e.http_status = res.status;
      if (res.status == 413) {
        e.message = "the request body is larger than the server's --max-body limit";
        e.code = "request_too_large";
      } else if (res.status == 404) {
        e.message = "no such endpoint: " + req.method + " " + req.path;
        e.code = "not_found";
      } else {
        e.message = "the request could not be handled (HTTP " + std::to_string(res.status) + ")";
      }
      SendError(res, e);
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      completions_.Handle(req, res, /*chat=*/false);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      completions_.Handle(req, res, /*chat=*/true);
    });
    http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json model = {{"id", options_.model_id},
                    {"object", "model"},
                    {"created", created_},
                    {"owned_by", "pagedinfer"}};
      res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(),
                      "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      EngineStats stats;
      OccupancyReport kv;
      worker_.Run([&](Engine& e) {
        stats = e.stats();
        kv = e.KvReport();
      });
      res.set_content(PrometheusText(stats, kv, worker_.counters()), "text/plain; version=0.0.4");
    });
    http.Get("/v1/memory", [this](const httplib::Request&, httplib::Response& res) {
      std::string ledger, kv;
      worker_.Run([&](Engine& e) {
        ledger = e.ledger().ToJson();
        kv = e.KvReport().ToJson();
      });
      res.set_content("{\"ledger\":" + ledger + ",\"kv\":" + kv + "}", "application/json");
    });
  }

 private:
  // With --api-key, every /v1/ endpoint needs "Authorization: Bearer KEY".
  bool Authorize(const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return true;
    if (req.get_header_value("Authorization") == "Bearer " + options_.api_key) return true;
    ApiError e;
    e.http_status = 401;
    e.message = req.has_header("Authorization") ? "incorrect API key provided"
                                                : "missing API key (Authorization: Bearer KEY)";
    e.code = "invalid_api_key";
    SendError(res, e);
    return false;
  }

  EngineWorker& worker_;
  const ServerOptions& options_;
  CompletionsHandler completions_;
  const int64_t created_;
};

OpenAiServer::OpenAiServer(Engine& engine, ServerOptions options)
    : engine_(engine), options_(std::move(options)) {
  template_ = options_.chat_template.value_or(
      DetectChatTemplate(engine.model().tokenizer().spec().chat_template));
  worker_ = std::make_unique<EngineWorker>(engine_);
  http_ = std::make_unique<httplib::Server>();
  const int threads = options_.http_threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body);
  // Debian's cpp-httplib is a shared library built with a listen backlog of 5, so a burst of
  // clients connecting at once would be refused. Keep the listening socket's descriptor (the
  // options callback sees it before bind) so Bind() can raise the backlog afterwards.
  http_->set_socket_options([this](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_socket_ = sock;
  });
  handlers_ = std::make_unique<Handlers>(engine_, *worker_, options_, template_);
  handlers_->Install(*http_);
}

OpenAiServer::~OpenAiServer() {
  Stop();
  http_.reset();
  handlers_.reset();
  worker_.reset();
}

absl::StatusOr<int> OpenAiServer::Bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
  } else if (!http_->bind_to_port(options_.host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return absl::UnavailableError("cannot listen on " + options_.host + ":" +
                                  std::to_string(options_.port) +
                                  " (in use, or not an address of this machine)");
  }
  // On Linux a second listen() on a listening socket sets its backlog.
  if (listen_socket_ >= 0) ::listen(listen_socket_, kListenBacklog);
  return port;
}

void OpenAiServer::Listen() { http_->listen_after_bind(); }

void OpenAiServer::Stop() {
  if (http_) http_->stop();
}

}  // namespace pinfer::server
