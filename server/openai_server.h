// An OpenAI-compatible HTTP server over one Engine: /v1/completions, /v1/chat/completions
// (streamed as server-sent events or whole), /v1/models, /v1/memory, /health, /metrics
// (vLLM's metric names), /tokenize and /detokenize (llama-server's shapes); CORS when asked.
// The HTTP layer (server/http/) reads and writes on a few I/O threads; completions are
// parsed and tokenized on a small handler pool and posted to the EngineWorker, whose thread
// alone drives the engine. /health, /metrics and /v1/memory are answered on the I/O thread
// from a published snapshot, so no queued or abandoned work can hold them up.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "server/chat_formatter.h"
#include "server/engine_worker.h"
#include "server/http/http_limits.h"
#include "server/http/http_server.h"

namespace pinfer::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;          // 0: any free port (see Bind's result)
  std::string api_key;      // "": no authentication
  std::string model_id;     // the name /v1/models lists; requests may name any model
  http::Limits limits;      // body, headers, deadlines, connection caps (http_limits.h)
  int http_threads = 2;     // I/O threads (sockets, /health, /metrics)
  int handler_threads = 2;  // threads parsing and tokenizing requests
  // Parse special-token text inside chat messages too (llama.cpp's behaviour); off: only
  // the chat template's own text can produce special tokens.
  bool special_in_content = false;
  // How chats become prompts; null: the model's own template (ChatFormatter::ForModel, its
  // decision printed once).
  std::shared_ptr<const ChatFormatter> chat_formatter;
  // CORS: browser origins allowed to call the API ("*": any). Empty: no CORS headers and no
  // preflight answers (the default, since the API may carry a key).
  std::vector<std::string> allowed_origins;
};

class OpenAiServer {
 public:
  // The engine (and its model) must outlive the server. Starts the engine thread.
  OpenAiServer(Engine& engine, ServerOptions options);
  ~OpenAiServer();

  const ChatFormatter& chat_formatter() const { return *formatter_; }
  // Binds the listening socket; returns the port.
  absl::StatusOr<int> Bind();
  // Serves until Stop(); blocking.
  void Listen();
  // Graceful shutdown: stops accepting and waits up to `timeout` for the requests in flight
  // to finish; then ends the rest (a stream gets an error event and [DONE], any other
  // request a 503) and waits a little for those answers to be written. True when every
  // request got its answer. Call Stop() after it.
  bool Shutdown(std::chrono::milliseconds timeout);
  void Stop();

  http::ServerStats http_stats() const { return http_->stats(); }

 private:
  class Handlers;
  Engine& engine_;
  ServerOptions options_;
  std::shared_ptr<const ChatFormatter> formatter_;
  std::unique_ptr<EngineWorker> worker_;
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<http::Server> http_;
};

}  // namespace pinfer::server
