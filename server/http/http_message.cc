#include "server/http/http_message.h"

#include <cstdio>

namespace pinfer::http {
namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Header names and values from handlers are written as given, less CR and LF (a value with a
// line break would let its text start a header or a body of its own).
void AppendClean(std::string* out, std::string_view s) {
  for (char c : s) {
    if (c != '\r' && c != '\n') out->push_back(c);
  }
}

void AppendHeader(std::string* out, std::string_view name, std::string_view value) {
  AppendClean(out, name);
  out->append(": ");
  AppendClean(out, value);
  out->append("\r\n");
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::optional<std::string_view> Request::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (EqualsIgnoreCase(k, name)) return std::string_view(v);
  }
  return std::nullopt;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

std::string FormatHead(const Response& r, long long body_length, int version, bool keep_alive) {
  std::string out = version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out += std::to_string(r.status);
  out += ' ';
  out += ReasonPhrase(r.status);
  out += "\r\n";
  AppendHeader(&out, "Server", "pagedinfer");
  if (!r.content_type.empty()) AppendHeader(&out, "Content-Type", r.content_type);
  for (const auto& [k, v] : r.headers) AppendHeader(&out, k, v);
  if (body_length >= 0) {
    AppendHeader(&out, "Content-Length", std::to_string(body_length));
  } else if (version != 10) {
    AppendHeader(&out, "Transfer-Encoding", "chunked");
  }
  if (!keep_alive) {
    AppendHeader(&out, "Connection", "close");
  } else if (version == 10) {
    AppendHeader(&out, "Connection", "keep-alive");
  }
  out += "\r\n";
  return out;
}

std::string Chunk(std::string_view data) {
  char size[24];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string out = size;
  out.append(data);
  out += "\r\n";
  return out;
}

std::string SseEvent(std::string_view data) {
  std::string out = "data: ";
  out.append(data);
  out += "\n\n";
  return out;
}

}  // namespace pinfer::http
