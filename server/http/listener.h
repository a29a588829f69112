// Internal to server/http: the listening socket. Accepts connections one after another,
// counts each against the caps (in all and per client address) and starts a Connection, or
// answers 503 and closes when a cap is reached.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/http/server_shared.h"

namespace pinfer::http {

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(boost::asio::io_context& io, std::shared_ptr<ServerShared> shared);
  absl::StatusOr<int> Bind(const std::string& host, int port);
  void Start();  // the accept loop
  void Stop();   // closes the listening socket (any thread)

 private:
  void Accept();
  void OnAccept(const boost::system::error_code& ec, boost::asio::ip::tcp::socket socket);
  void RefuseConnection(boost::asio::ip::tcp::socket& socket);

  boost::asio::io_context& io_;
  const std::shared_ptr<ServerShared> shared_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;  // after running out of descriptors
};

}  // namespace pinfer::http
