// An event-driven HTTP/1.1 server (Boost.Beast's parser over Asio): a few I/O threads serve
// every connection, so a slow client costs a socket, not a thread; every resource a client
// can make it hold is bounded (http_limits.h). Handlers come from a Router and answer through
// their Exchange. Knows nothing of the OpenAI API above it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/http/http_limits.h"
#include "server/http/router.h"

namespace pinfer::http {

struct ServerConfig {
  Limits limits;
  int io_threads = 2;       // threads running the sockets (and kIoThread handlers)
  int handler_threads = 2;  // threads running kHandlerPool handlers
  // The body of the server's own refusals (413, 431, 415, 503, 404...); default: plain text.
  std::function<Response(int status, const std::string& message)> error_page;
  // Called for every response head before it is written (e.g. to add CORS headers).
  std::function<void(const Request&, Response&)> decorate;
};

struct ServerStats {
  int64_t connections_open = 0;
  int64_t connections_accepted = 0;  // in all
  int64_t connections_refused = 0;   // over max_connections or max_connections_per_client
  int64_t requests = 0;              // requests handed to a handler
  int64_t requests_refused = 0;      // answered by the server itself (4xx/5xx before routing)
  int64_t timeouts = 0;              // connections closed by a request or write deadline
  int64_t client_disconnects = 0;    // clients gone while their request was being handled
  int64_t in_flight = 0;             // requests whose answer is not yet written
};

class ServerCore;
class Listener;

class Server {
 public:
  Server(Router router, ServerConfig config);
  ~Server();  // Stop()s
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Opens the listening socket (host: an address or a name; port 0: any free port).
  absl::StatusOr<int> Bind(const std::string& host, int port);
  // Serves on the I/O threads (the caller's among them) until Stop(); blocking.
  void Run();
  // Graceful shutdown, first step: stop accepting, close idle kept-alive connections, answer
  // requests that arrive from now on with 503, and send "Connection: close" on every answer.
  void BeginShutdown();
  // Waits until no request is in flight (every answer written) or the timeout passes;
  // true when none is.
  bool WaitForIdle(std::chrono::milliseconds timeout);
  // Closes every connection and the listening socket; Run() returns. Any thread, any time.
  void Stop();

  ServerStats stats() const;
  const Limits& limits() const;

 private:
  std::unique_ptr<ServerCore> core_;
};

}  // namespace pinfer::http
