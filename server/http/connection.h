// Internal to server/http: one client connection. Reads requests with Beast's parser under
// the limits and deadlines (http_limits.h), routes each to its handler, watches the socket
// for the client hanging up while the handler works, writes the answer, then waits for the
// next request (keep-alive) or closes. Every member runs on the connection's strand.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/http/exchange.h"
#include "server/http/server_shared.h"

namespace pinfer::http {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(boost::asio::ip::tcp::socket socket, std::shared_ptr<ServerShared> shared,
             std::string remote_address);
  ~Connection();

  void Start();
  // Runs fn on the strand unless the server stopped; any thread.
  void Post(std::function<void(Connection&)> fn);
  void Drain();  // the server began shutting down: an idle connection closes
  void Abort();  // close now

  // Exchange's calls, on the strand; ignored unless `ex` is the current exchange.
  void DoRespond(Exchange* ex, Response r);
  void DoBeginStream(Exchange* ex, Response head);
  void DoWrite(Exchange* ex, std::string bytes);
  void DoEnd(Exchange* ex);

 private:
  enum class State { kReading, kHandling, kStreaming, kFinishing, kRefusing, kClosed };
  using error_code = boost::system::error_code;

  void ReadRequest(bool first);
  void ReadHeader();
  void OnHeader(const error_code& ec);
  void OnBody(const error_code& ec);
  void OnReadError(const error_code& ec);
  void Dispatch();
  void Watch();
  void OnWatch(const error_code& ec, uint64_t generation);
  void Enqueue(std::string bytes, bool last);
  void Flush();
  void OnWritten(const error_code& ec);
  void FinishExchange();
  void Refuse(int status, const std::string& message);
  void Linger();
  void Close();
  bool KeepAlive() const;

  boost::beast::tcp_stream stream_;
  const std::shared_ptr<ServerShared> shared_;
  const std::string remote_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::chrono::steady_clock::time_point deadline_;  // the current request's
  State state_ = State::kReading;
  bool waiting_first_byte_ = false;
  bool keep_alive_ = false;  // the client allows it (its request said so)
  bool chunked_ = false;     // the streamed answer is chunked (HTTP/1.1)
  int version_ = 11;
  uint64_t watch_generation_ = 0;
  std::shared_ptr<Exchange> exchange_;
  std::deque<std::string> queue_;       // bytes waiting to be written
  std::vector<std::string> in_flight_;  // bytes being written
  size_t pending_bytes_ = 0;            // in queue_ and in_flight_
  bool writing_ = false;
  bool last_queued_ = false;  // the answer's last bytes are queued
  bool close_after_ = false;  // close (not keep-alive) once the answer is written
  std::vector<char> discard_;
};

}  // namespace pinfer::http
