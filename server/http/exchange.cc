#include "server/http/exchange.h"

#include "server/http/connection.h"

namespace pinfer::http {

void Exchange::Send(std::function<void(Connection&)> fn) {
  if (closed()) return;
  if (std::shared_ptr<Connection> c = connection_.lock()) c->Post(std::move(fn));
}

void Exchange::Respond(Response response) {
  Send([self = shared_from_this(), r = std::move(response)](Connection& c) mutable {
    c.DoRespond(self.get(), std::move(r));
  });
}

void Exchange::BeginStream(Response head) {
  Send([self = shared_from_this(), h = std::move(head)](Connection& c) mutable {
    c.DoBeginStream(self.get(), std::move(h));
  });
}

void Exchange::Write(std::string bytes) {
  Send([self = shared_from_this(), b = std::move(bytes)](Connection& c) mutable {
    c.DoWrite(self.get(), std::move(b));
  });
}

void Exchange::End() {
  Send([self = shared_from_this()](Connection& c) { c.DoEnd(self.get()); });
}

void Exchange::Post(std::function<void()> fn) {
  Send([f = std::move(fn)](Connection&) { f(); });
}

void Exchange::OnClose(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed()) {
      on_close_ = std::move(fn);
      return;
    }
  }
  fn();
}

void Exchange::MarkClosed() {
  std::function<void()> fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_.store(true, std::memory_order_release);
    fn = std::move(on_close_);
  }
  if (fn) fn();
}

}  // namespace pinfer::http
