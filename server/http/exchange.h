// One request and its answer on one connection: what a handler receives. A handler answers
// once, either whole (Respond) or streamed (BeginStream, Write..., End), from any thread and
// at any later time (it may keep the Exchange while the engine works); the bytes go out on
// the connection's I/O thread. If the client hangs up (or the server cuts the connection)
// first, the OnClose callback runs and later calls are ignored.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "server/http/http_message.h"

namespace pinfer::http {

class Connection;

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  const Request& request() const { return request_; }

  // The whole answer. Later answers (and streaming calls) are ignored.
  void Respond(Response response);
  // A streamed answer: the head now (status, content type, headers; the body is ignored),
  // then each Write's bytes as they come (one chunk each), then End.
  void BeginStream(Response head);
  void Write(std::string bytes);
  void End();
  // Runs fn on the connection's I/O thread, in order with this exchange's other calls; fn is
  // dropped when the connection is gone. Lets a handler do its formatting off the engine's
  // thread.
  void Post(std::function<void()> fn);

  // fn runs once if the connection closes before the answer was completely written (the
  // client left, a write deadline passed, the server stopped); at once (on this thread) if
  // that already happened. fn must not block: it runs on an I/O thread. One callback; a
  // second call replaces the first.
  void OnClose(std::function<void()> fn);
  bool closed() const { return closed_.load(std::memory_order_acquire); }

 private:
  friend class Connection;
  Exchange(Request request, std::weak_ptr<Connection> connection)
      : request_(std::move(request)), connection_(std::move(connection)) {}
  void MarkClosed();  // the connection's I/O thread: runs the OnClose callback
  void Send(std::function<void(Connection&)> fn);

  const Request request_;
  const std::weak_ptr<Connection> connection_;
  std::atomic<bool> closed_{false};
  std::mutex mu_;
  std::function<void()> on_close_;  // guarded by mu_
};

using Handler = std::function<void(std::shared_ptr<Exchange>)>;

}  // namespace pinfer::http
