// Test clients for the server: a small blocking HTTP/1.1 client (Boost.Beast, keep-alive),
// and raw-socket helpers for what a well-behaved client never does (dripping headers,
// hanging up mid-request, oversized and malformed requests). Loopback only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pinfer::testing {

struct HttpReply {
  int status = -1;  // -1: no answer (error says why)
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-case
  std::string error;
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
};

class HttpClient {
 public:
  explicit HttpClient(int port, std::chrono::seconds timeout = std::chrono::seconds(60),
                      std::string host = "127.0.0.1")
      : host_(std::move(host)), port_(port), timeout_(timeout) {}

  HttpReply Get(const std::string& path,
                const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    return Send("GET", path, "", headers);
  }
  HttpReply Post(const std::string& path, const std::string& body,
                 std::vector<std::pair<std::string, std::string>> headers = {}) {
    headers.emplace_back("Content-Type", "application/json");
    return Send("POST", path, body, headers);
  }
  HttpReply Send(const std::string& method, const std::string& path, const std::string& body,
                 const std::vector<std::pair<std::string, std::string>>& headers) {
    for (int attempt = 0; attempt < 2; ++attempt) {  // a kept-alive socket may have closed
      const bool fresh = !stream_;
      HttpReply r = Once(method, path, body, headers);
      if (r.status > 0 || fresh) return r;
    }
    return Once(method, path, body, headers);
  }

 private:
  using tcp = boost::asio::ip::tcp;
  HttpReply Once(const std::string& method, const std::string& path, const std::string& body,
                 const std::vector<std::pair<std::string, std::string>>& headers) {
    namespace http = boost::beast::http;
    HttpReply out;
    boost::beast::error_code ec;
    if (!stream_) {
      stream_.emplace(io_);
      stream_->expires_after(timeout_);
      stream_->connect(
          tcp::endpoint(boost::asio::ip::make_address(host_), static_cast<unsigned short>(port_)),
          ec);
      if (ec) return Fail(&out, "connect: " + ec.message());
    }
    http::request<http::string_body> req{http::string_to_verb(method), path, 11};
    req.set(http::field::host, host_);
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    if (!body.empty() || method == "POST") req.prepare_payload();
    stream_->expires_after(timeout_);
    http::write(*stream_, req, ec);
    if (ec) return Fail(&out, "write: " + ec.message());
    http::response_parser<http::string_body> parser;
    parser.body_limit(1ull << 32);
    http::read(*stream_, buffer_, parser, ec);
    if (ec) return Fail(&out, "read: " + ec.message());
    const auto& res = parser.get();
    out.status = static_cast<int>(res.result_int());
    out.body = res.body();
    for (const auto& f : res) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(f.value());
    }
    if (!res.keep_alive()) stream_.reset();
    return out;
  }
  HttpReply Fail(HttpReply* out, std::string why) {
    out->error = std::move(why);
    stream_.reset();
    buffer_.clear();
    return *out;
  }

  const std::string host_;
  const int port_;
  const std::chrono::seconds timeout_;
  boost::asio::io_context io_;
  std::optional<boost::beast::tcp_stream> stream_;
  boost::beast::flat_buffer buffer_;
};

// The sample of the metric `name` (a full name: "pagedinfer_requests_running") on a /metrics
// page, or -1 when the sample line is absent (# HELP and # TYPE lines name it too, never at a
// line start followed by a space).
inline double MetricIn(const std::string& page, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = page.find(key);
  return at == std::string::npos ? -1 : std::strtod(page.c_str() + at + key.size(), nullptr);
}
// MetricIn of the server's /metrics page at port; -1 when the page does not come.
inline double MetricOf(int port, const std::string& name) {
  const HttpReply res = HttpClient(port).Get("/metrics");
  return res.status == 200 ? MetricIn(res.body, name) : -1;
}

// A blocking TCP connection to ip:port, optionally from a chosen local address (any of
// 127.0.0.0/8 works on Linux: a second "client address"). -1 on failure.
inline int ConnectTcp(int port, const char* ip = "127.0.0.1", const char* from = nullptr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (from != nullptr) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, from, &local.sin_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
      ::close(fd);
      return -1;
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip, &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Writes all of data (MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE).
inline bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads until the peer closes, `until` appears, or timeout_ms passes.
inline std::string ReadFor(int fd, int timeout_ms, const std::string& until = "") {
  std::string got;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[16384];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          end - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
    if (!until.empty() && got.find(until) != std::string::npos) break;
  }
  return got;
}

// True when the peer has closed the connection (or reset it) within timeout_ms.
inline bool PeerClosed(int fd, int timeout_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          end - std::chrono::steady_clock::now())
                                          .count());
    if (::poll(&p, 1, std::max(left, 0)) <= 0) return false;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
  return false;
}

// The status code of a raw HTTP response ("HTTP/1.1 413 ..."), -1 if none.
inline int StatusOf(const std::string& raw) {
  if (raw.size() < 12 || raw.compare(0, 5, "HTTP/") != 0) return -1;
  return std::atoi(raw.c_str() + 9);
}

}  // namespace pinfer::testing
