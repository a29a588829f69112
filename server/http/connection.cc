#include "server/http/connection.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <shared_mutex>

#include "server/http/request_checks.h"

namespace pinfer::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

constexpr size_t kReadChunk = 4096;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace

Connection::Connection(net::ip::tcp::socket socket, std::shared_ptr<ServerShared> shared,
                       std::string remote_address)
    : stream_(std::move(socket)),
      shared_(std::move(shared)),
      remote_(std::move(remote_address)),
      // Room for a whole header plus one read; a body passes through into the parser.
      buffer_(shared_->limits().max_header_bytes + 2 * kReadChunk + 65536) {}

Connection::~Connection() { shared_->Release(this, remote_); }

void Connection::Post(std::function<void(Connection&)> fn) {
  std::shared_lock<std::shared_mutex> lock(shared_->post_mu);
  if (!shared_->open) return;
  net::post(stream_.get_executor(), [self = shared_from_this(), fn = std::move(fn)] { fn(*self); });
}

void Connection::Start() {
  shared_->Register(this, weak_from_this());
  error_code ec;
  stream_.socket().non_blocking(true, ec);  // for the watch's reads (async ops are unaffected)
  stream_.socket().set_option(net::ip::tcp::no_delay(true), ec);
  Post([](Connection& c) { c.ReadRequest(/*first=*/true); });
}

void Connection::Drain() {
  Post([](Connection& c) {
    if (c.state_ == State::kReading && c.waiting_first_byte_) c.Close();
  });
}

void Connection::Abort() {
  Post([](Connection& c) { c.Close(); });
}

bool Connection::KeepAlive() const {
  return keep_alive_ && !close_after_ && !shared_->draining_flag.load();
}

// Waits for a request's first byte (the keep-alive deadline between requests), then reads it
// whole under the request deadline.
void Connection::ReadRequest(bool first) {
  state_ = State::kReading;
  if (!first && shared_->draining_flag.load() && buffer_.size() == 0) return Close();
  if (buffer_.size() > 0) return ReadHeader();
  waiting_first_byte_ = true;
  stream_.expires_after(shared_->limits().keep_alive_timeout);
  stream_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](const error_code& ec, size_t n) {
                            self->waiting_first_byte_ = false;
                            if (self->state_ == State::kClosed) return;
                            self->buffer_.commit(n);
                            // A timeout here is an idle connection's ordinary end.
                            if (ec) return self->Close();
                            self->ReadHeader();
                          });
}

void Connection::ReadHeader() {
  waiting_first_byte_ = false;
  const Limits& l = shared_->limits();
  deadline_ = std::chrono::steady_clock::now() + l.request_timeout;
  stream_.expires_at(deadline_);
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(l.max_header_bytes));
  parser_->body_limit(static_cast<uint64_t>(l.max_body));
  bhttp::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](const error_code& ec, size_t) { self->OnHeader(ec); });
}

void Connection::OnReadError(const error_code& ec) {
  if (state_ == State::kClosed) return;
  if (std::optional<Refusal> r = RefusalForReadError(ec, shared_->limits())) {
    return Refuse(r->status, r->message);
  }
  if (ec == beast::error::timeout) shared_->Count(&ServerStats::timeouts);
  Close();  // no one to answer (the deadline closed the socket, or the client left)
}

void Connection::OnHeader(const error_code& ec) {
  if (ec) return OnReadError(ec);
  if (std::optional<Refusal> r = CheckRequestHeader(parser_->get(), shared_->limits())) {
    return Refuse(r->status, r->message);
  }
  if (parser_->is_done()) return OnBody({});
  // A chunked body grows up to the limit without reallocating (an untouched reservation
  // costs address space, not memory), so it never holds more than the limit at once.
  if (parser_->chunked()) parser_->get().body().reserve(shared_->limits().max_body);
  auto read_body = [self = shared_from_this()] {
    self->stream_.expires_at(self->deadline_);
    bhttp::async_read(self->stream_, self->buffer_, *self->parser_,
                      [self](const error_code& e, size_t) { self->OnBody(e); });
  };
  if (!ExpectsContinue(parser_->get())) return read_body();
  // The client waits for this before it sends its body.
  stream_.expires_at(deadline_);
  net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                   [self = shared_from_this(), read_body](const error_code& wec, size_t) {
                     if (wec) return self->Close();
                     read_body();
                   });
}

void Connection::OnBody(const error_code& ec) {
  if (ec) return OnReadError(ec);
  if (state_ == State::kClosed) return;
  Dispatch();
}

void Connection::Dispatch() {
  auto& msg = parser_->get();
  version_ = static_cast<int>(msg.version());
  keep_alive_ = msg.keep_alive();
  close_after_ = false;
  if (shared_->draining_flag.load()) {
    return Refuse(503, "the server is shutting down");
  }
  Request req = ToRequest(std::move(msg), remote_);
  parser_.reset();

  const Router::Route route = shared_->router.Find(req.method, req.path);
  if (route.handler == nullptr) {
    return Refuse(route.status, route.status == 405
                                    ? "method " + req.method + " is not allowed on " + req.path
                                    : "no such endpoint: " + req.method + " " + req.path);
  }
  exchange_ = std::shared_ptr<Exchange>(new Exchange(std::move(req), weak_from_this()));
  state_ = State::kHandling;
  last_queued_ = false;
  shared_->RequestStarted();
  stream_.expires_never();
  Watch();
  if (route.run_on == RunOn::kIoThread || shared_->pool == nullptr) {
    (*route.handler)(exchange_);
  } else {
    net::post(*shared_->pool, [h = route.handler, ex = exchange_] { (*h)(ex); });
  }
}

// While a handler works, a read-readiness wait on the socket notices the client hanging up
// (EOF or reset); bytes that arrive instead (a pipelined request) are kept for later.
void Connection::Watch() {
  if (buffer_.max_size() - buffer_.size() < kReadChunk) return;  // full: stop watching
  stream_.socket().async_wait(net::socket_base::wait_read,
                              [self = shared_from_this(), g = watch_generation_](
                                  const error_code& ec) { self->OnWatch(ec, g); });
}

void Connection::OnWatch(const error_code& ec, uint64_t generation) {
  if (generation != watch_generation_ || state_ == State::kClosed || !exchange_) return;
  if (ec) {
    if (ec != net::error::operation_aborted) Close();
    return;
  }
  error_code rec;
  const size_t n = stream_.socket().read_some(buffer_.prepare(kReadChunk), rec);
  if (rec == net::error::would_block || rec == net::error::try_again) return Watch();
  if (rec || n == 0) {
    shared_->Count(&ServerStats::client_disconnects);
    return Close();
  }
  buffer_.commit(n);
  Watch();
}

void Connection::DoRespond(Exchange* ex, Response r) {
  if (ex != exchange_.get() || state_ != State::kHandling) return;
  if (shared_->config.decorate) shared_->config.decorate(ex->request(), r);
  const bool keep = KeepAlive();
  close_after_ = !keep;
  std::string bytes = FormatHead(r, static_cast<long long>(r.body.size()), version_, keep);
  if (ex->request().method != "HEAD") bytes += r.body;
  state_ = State::kFinishing;
  Enqueue(std::move(bytes), /*last=*/true);
}

void Connection::DoBeginStream(Exchange* ex, Response head) {
  if (ex != exchange_.get() || state_ != State::kHandling) return;
  if (shared_->config.decorate) shared_->config.decorate(ex->request(), head);
  chunked_ = version_ != 10;  // HTTP/1.0: the body ends when the connection closes
  const bool keep = chunked_ && KeepAlive();
  close_after_ = !keep;
  state_ = State::kStreaming;
  Enqueue(FormatHead(head, -1, version_, keep), /*last=*/false);
}

void Connection::DoWrite(Exchange* ex, std::string bytes) {
  if (ex != exchange_.get() || state_ != State::kStreaming || bytes.empty()) return;
  Enqueue(chunked_ ? Chunk(bytes) : std::move(bytes), /*last=*/false);
}

void Connection::DoEnd(Exchange* ex) {
  if (ex != exchange_.get() || state_ != State::kStreaming) return;
  state_ = State::kFinishing;
  Enqueue(chunked_ ? std::string(kLastChunk) : std::string(), /*last=*/true);
}

void Connection::Enqueue(std::string bytes, bool last) {
  pending_bytes_ += bytes.size();
  if (!bytes.empty()) queue_.push_back(std::move(bytes));
  if (last) last_queued_ = true;
  if (pending_bytes_ > shared_->limits().max_pending_write) {
    shared_->Count(&ServerStats::timeouts);  // a reader this slow is treated as stalled
    return Close();
  }
  if (!writing_) Flush();
}

void Connection::Flush() {
  if (queue_.empty()) {
    if (last_queued_) FinishExchange();
    return;
  }
  in_flight_.clear();
  std::vector<net::const_buffer> buffers;
  while (!queue_.empty() && in_flight_.size() < 64) {
    in_flight_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  for (const std::string& s : in_flight_) buffers.emplace_back(s.data(), s.size());
  writing_ = true;
  stream_.expires_after(shared_->limits().write_timeout);
  net::async_write(stream_, buffers, [self = shared_from_this()](const error_code& ec, size_t) {
    self->OnWritten(ec);
  });
}

void Connection::OnWritten(const error_code& ec) {
  writing_ = false;
  if (state_ == State::kClosed) return;
  if (ec) {
    if (ec == beast::error::timeout) shared_->Count(&ServerStats::timeouts);
    return Close();
  }
  for (const std::string& s : in_flight_) pending_bytes_ -= s.size();
  in_flight_.clear();
  Flush();
}

// The answer is written: the exchange is over. Next request, or close.
void Connection::FinishExchange() {
  if (state_ == State::kRefusing) return Linger();
  if (exchange_) {
    exchange_.reset();
    shared_->RequestEnded();
  }
  ++watch_generation_;
  error_code ec;
  stream_.socket().cancel(ec);  // the watch (nothing else is pending now)
  if (close_after_) return Close();
  ReadRequest(/*first=*/false);
}

// An answer from the server itself (limits, parse errors, shutdown), then a lingering close.
void Connection::Refuse(int status, const std::string& message) {
  shared_->Count(&ServerStats::requests_refused);
  Response r = shared_->ErrorPage(status, message);
  bool has_retry = false;
  for (const auto& [k, v] : r.headers) has_retry = has_retry || EqualsIgnoreCase(k, "Retry-After");
  if (status == 503 && !has_retry) r.Set("Retry-After", "1");
  close_after_ = true;
  state_ = State::kRefusing;
  std::string bytes = FormatHead(r, static_cast<long long>(r.body.size()), 11, false) + r.body;
  Enqueue(std::move(bytes), /*last=*/true);
}

// Stops sending and reads (and drops) what the client still sends for a while, so that its
// unread input does not turn the close into a reset that could discard the answer.
void Connection::Linger() {
  state_ = State::kFinishing;
  error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  if (ec) return Close();
  discard_.resize(16384);
  stream_.expires_after(shared_->limits().linger_timeout);
  struct Drain {
    std::shared_ptr<Connection> self;
    void operator()(const error_code& e, size_t) {
      if (e || self->state_ == State::kClosed) return self->Close();
      self->stream_.async_read_some(net::buffer(self->discard_), std::move(*this));
    }
  };
  stream_.async_read_some(net::buffer(discard_), Drain{shared_from_this()});
}

void Connection::Close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  ++watch_generation_;
  queue_.clear();
  if (exchange_) {
    std::shared_ptr<Exchange> ex = std::move(exchange_);
    shared_->RequestEnded();
    ex->MarkClosed();
  }
  error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
  stream_.close();
}

}  // namespace pinfer::http
