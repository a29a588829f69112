// The request and response values the HTTP layer hands to handlers and takes back. Plain
// data: no sockets, no Beast types, so that handlers (server/*.cc) know nothing of the
// connection code.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pinfer::http {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // target up to '?'
  std::string query;   // after '?', "" when none
  int version = 11;    // 10 or 11
  // In arrival order, names as sent (compare with Header(), which ignores case).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;            // the decoded body: at most Limits::max_body bytes
  std::string remote_address;  // the client's IP address ("127.0.0.1", "::1")

  // The first header of that name (ASCII case-insensitive), or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  std::string body;  // ignored for a streamed response's head

  Response& Set(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
    return *this;
  }
};

// ASCII case-insensitive equality (header names, tokens such as "chunked").
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// The standard reason phrase for a status code ("OK", "Payload Too Large", ...).
std::string_view ReasonPhrase(int status);

// The status line and headers of `r` (Content-Type, Content-Length or chunked framing,
// Connection), ending with the blank line. body_length < 0: a chunked (streamed) body, or
// for HTTP/1.0 a body that ends when the connection closes.
std::string FormatHead(const Response& r, long long body_length, int version, bool keep_alive);

// One chunk of a chunked body ("1a\r\n<data>\r\n"); the last chunk is "0\r\n\r\n".
std::string Chunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// A server-sent event carrying `data` ("data: <data>\n\n"); data must hold no newline
// (JSON from nlohmann's dump() never does).
std::string SseEvent(std::string_view data);

}  // namespace pinfer::http
