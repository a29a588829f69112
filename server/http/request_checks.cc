#include "server/http/request_checks.h"

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>

namespace pinfer::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

std::string SizeText(size_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace

std::optional<Refusal> CheckRequestHeader(const BeastRequest& req, const Limits& l) {
  if (req.version() != 10 && req.version() != 11) {
    return Refusal{505, "only HTTP/1.0 and HTTP/1.1 are served"};
  }
  int fields = 0;
  for (auto it = req.begin(); it != req.end(); ++it) ++fields;
  if (fields > l.max_headers) {
    return Refusal{431, "the request has " + std::to_string(fields) + " header fields; at most " +
                            std::to_string(l.max_headers) + " are accepted"};
  }
  if (auto it = req.find(bhttp::field::content_encoding);
      it != req.end() && !EqualsIgnoreCase(it->value(), "identity")) {
    return Refusal{415, "Content-Encoding '" + std::string(it->value()) +
                            "' is not accepted: send the request body uncompressed"};
  }
  if (auto it = req.find(bhttp::field::transfer_encoding); it != req.end()) {
    if (!EqualsIgnoreCase(it->value(), "chunked") ||
        req.count(bhttp::field::transfer_encoding) > 1) {
      return Refusal{501, "Transfer-Encoding '" + std::string(it->value()) +
                              "' is not supported (only chunked)"};
    }
    if (req.find(bhttp::field::content_length) != req.end()) {
      return Refusal{400, "a request must not carry both Content-Length and Transfer-Encoding"};
    }
  }
  if (auto it = req.find(bhttp::field::expect);
      it != req.end() && !EqualsIgnoreCase(it->value(), "100-continue")) {
    return Refusal{417, "the only expectation this server meets is 100-continue"};
  }
  return std::nullopt;
}

std::optional<Refusal> RefusalForReadError(const boost::system::error_code& ec, const Limits& l) {
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
    return Refusal{431, "the request's headers exceed " + SizeText(l.max_header_bytes)};
  }
  if (ec == bhttp::error::body_limit) {
    return Refusal{413, "the request body is larger than the server's limit of " +
                            SizeText(l.max_body) + " (--max-body)"};
  }
  if (ec == beast::error::timeout || ec == bhttp::error::end_of_stream ||
      ec == bhttp::error::partial_message || ec == net::error::eof ||
      ec == net::error::connection_reset || ec == net::error::operation_aborted ||
      ec == net::error::bad_descriptor) {
    return std::nullopt;
  }
  return Refusal{400, "malformed HTTP request (" + ec.message() + ")"};
}

bool ExpectsContinue(const BeastRequest& req) {
  auto it = req.find(bhttp::field::expect);
  return it != req.end() && EqualsIgnoreCase(it->value(), "100-continue");
}

Request ToRequest(BeastRequest&& msg, std::string remote_address) {
  Request req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  const size_t q = req.target.find('?');
  req.path = req.target.substr(0, q);
  if (q != std::string::npos) req.query = req.target.substr(q + 1);
  req.version = static_cast<int>(msg.version());
  for (const auto& f : msg) req.headers.emplace_back(f.name_string(), f.value());
  req.body = std::move(msg.body());
  req.remote_address = std::move(remote_address);
  return req;
}

}  // namespace pinfer::http
