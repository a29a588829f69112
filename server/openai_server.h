// An OpenAI-compatible HTTP server over one Engine: /v1/completions, /v1/chat/completions
// (streamed as server-sent events or whole), /v1/models, /v1/memory, /health, /metrics.
// HTTP handler threads parse and answer; the EngineWorker's thread alone drives the engine.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "server/chat_template.h"
#include "server/engine_worker.h"

namespace httplib {
class Server;
}

namespace pinfer::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (see Bind's result)
  std::string api_key;  // "": no authentication
  size_t max_body = 1 << 20;
  std::string model_id;   // the name /v1/models lists; requests may name any model
  int http_threads = 64;  // handler threads: the most requests in flight at once
  // The chat template family; nullopt: detected from the model's tokenizer.chat_template.
  std::optional<ChatTemplate> chat_template;
};

class OpenAiServer {
 public:
  // The engine (and its model) must outlive the server. Starts the engine thread.
  OpenAiServer(Engine& engine, ServerOptions options);
  ~OpenAiServer();

  ChatTemplate chat_template() const { return template_; }
  // Binds the listening socket; returns the port.
  absl::StatusOr<int> Bind();
  // Serves until Stop(); blocking.
  void Listen();
  void Stop();

 private:
  class Handlers;
  Engine& engine_;
  ServerOptions options_;
  ChatTemplate template_;
  std::unique_ptr<EngineWorker> worker_;
  static constexpr int kListenBacklog = 512;
  std::unique_ptr<httplib::Server> http_;
  int listen_socket_ = -1;  // the listening socket (set while binding)
  std::unique_ptr<Handlers> handlers_;
};

}  // namespace pinfer::server
