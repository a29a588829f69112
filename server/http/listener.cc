#include "server/http/listener.h"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "server/http/connection.h"

namespace pinfer::http {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr int kBacklog = 1024;

}  // namespace

Listener::Listener(net::io_context& io, std::shared_ptr<ServerShared> shared)
    : io_(io),
      shared_(std::move(shared)),
      strand_(net::make_strand(io)),
      acceptor_(strand_),
      retry_(strand_) {}

absl::StatusOr<int> Listener::Bind(const std::string& host, int port) {
  auto fail = [&](const std::string& why) {
    return absl::UnavailableError("cannot listen on " + host + ":" + std::to_string(port) + " (" +
                                  why + ")");
  };
  boost::system::error_code ec;
  tcp::resolver resolver(io_);
  auto results = resolver.resolve(host, std::to_string(port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) return fail("not an address of this machine: " + ec.message());
  const tcp::endpoint ep = results.begin()->endpoint();
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(kBacklog, ec);
  if (ec) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    return fail(ec.message());
  }
  return static_cast<int>(acceptor_.local_endpoint().port());
}

void Listener::Start() {
  net::post(strand_, [self = shared_from_this()] { self->Accept(); });
}

void Listener::Stop() {
  net::post(strand_, [self = shared_from_this()] {
    boost::system::error_code ec;
    self->acceptor_.close(ec);
    self->retry_.cancel();
  });
}

void Listener::Accept() {
  if (!acceptor_.is_open()) return;
  acceptor_.async_accept(
      net::make_strand(io_),
      [self = shared_from_this()](const boost::system::error_code& ec, tcp::socket socket) {
        self->OnAccept(ec, std::move(socket));
      });
}

void Listener::OnAccept(const boost::system::error_code& ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // Out of descriptors (EMFILE/ENFILE) or a transient error: wait a little and go on.
    retry_.expires_after(std::chrono::milliseconds(50));
    retry_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
      if (!e) self->Accept();
    });
    return;
  }
  boost::system::error_code aec;
  const tcp::endpoint remote = socket.remote_endpoint(aec);
  std::string address = aec ? std::string("?") : remote.address().to_string();
  if (shared_->draining_flag.load() || !shared_->Admit(address)) {
    RefuseConnection(socket);
  } else {
    std::make_shared<Connection>(std::move(socket), shared_, std::move(address))->Start();
  }
  Accept();
}

// A short 503 written without waiting (a new socket's send buffer is empty), then closed.
void Listener::RefuseConnection(tcp::socket& socket) {
  Response r = shared_->ErrorPage(
      503, shared_->draining_flag.load()
               ? "the server is shutting down"
               : "too many connections (the server's connection caps are reached); retry later");
  bool has_retry = false;
  for (const auto& [k, v] : r.headers) has_retry = has_retry || EqualsIgnoreCase(k, "Retry-After");
  if (!has_retry) r.Set("Retry-After", "1");
  const std::string bytes =
      FormatHead(r, static_cast<long long>(r.body.size()), 11, /*keep_alive=*/false) + r.body;
  boost::system::error_code ec;
  socket.non_blocking(true, ec);
  socket.write_some(net::buffer(bytes), ec);
  socket.shutdown(tcp::socket::shutdown_send, ec);
  socket.close(ec);
}

}  // namespace pinfer::http
