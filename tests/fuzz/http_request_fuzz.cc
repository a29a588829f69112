// libFuzzer target for the HTTP layer's request handling without sockets: the input is the
// bytes a client sends. They go through Beast's parser with the limits a connection sets, the
// header checks (request_checks.h) and the conversion to a handler's Request, as
// server/http/connection.cc runs them. Whatever the bytes, no step may crash; every text the
// layer can put into an error answer (its refusals, the method and path of a 404) must make
// an OpenAI error body that is valid JSON; a response head echoing the request's header
// values must stay one header per line.
// Built with -DPAGEDINFER_FUZZ=ON and clang as a fuzzer, and in every build as a replay test
// of its seed corpus (tests/fuzz/CMakeLists.txt).
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "server/http/http_limits.h"
#include "server/http/http_message.h"
#include "server/http/request_checks.h"
#include "server/openai_request.h"

namespace {

namespace bhttp = boost::beast::http;

// The error body the server sends for `message` must parse back with the same message.
void CheckErrorBody(int status, const std::string& message) {
  pinfer::server::ApiError e;
  e.http_status = status;
  e.message = message;
  const nlohmann::json j =
      nlohmann::json::parse(pinfer::server::ErrorJson(e), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j["error"]["message"].is_string()) __builtin_trap();
}

// Lines of a formatted head: the status line, one per header, the blank line.
void CheckHead(const pinfer::http::Request& req) {
  pinfer::http::Response r;
  for (const auto& [k, v] : req.headers) r.Set(k, v);
  const std::string head = pinfer::http::FormatHead(r, 0, req.version, true);
  size_t lines = 0;
  for (size_t i = 0; i < head.size(); ++i) {
    const bool cr = head[i] == '\r', lf = head[i] == '\n';
    if (cr && (i + 1 == head.size() || head[i + 1] != '\n')) __builtin_trap();  // a lone CR
    if (lf && (i == 0 || head[i - 1] != '\r')) __builtin_trap();                // a lone LF
    lines += lf;
  }
  // Status line, Server, Content-Type, the echoed headers, Content-Length, (HTTP/1.0's
  // Connection: keep-alive,) the blank line.
  if (lines != req.headers.size() + 5 + (req.version == 10)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pinfer::http::Limits limits;
  limits.max_body = 64 << 10;  // the default 1 MiB, scaled to the fuzzer's input sizes
  limits.max_header_bytes = 8 << 10;
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(limits.max_header_bytes));
  parser.body_limit(static_cast<uint64_t>(limits.max_body));
  parser.eager(true);

  boost::asio::const_buffer in(data, size);
  boost::system::error_code ec;
  bool header_checked = false;
  // As Beast's read loop drives the parser: put() what has arrived; on need_more it reads
  // from the socket before putting again, and here nothing more will come, so the client has
  // closed: put_eof().
  while (!parser.is_done()) {
    in += parser.put(in, ec);
    if (!header_checked && parser.is_header_done()) {
      header_checked = true;
      if (auto refusal = pinfer::http::CheckRequestHeader(parser.get(), limits)) {
        CheckErrorBody(refusal->status, refusal->message);
        return 0;
      }
      (void)pinfer::http::ExpectsContinue(parser.get());
    }
    if (ec == bhttp::error::need_more || (!ec && in.size() == 0 && !parser.is_done())) {
      if (!parser.got_some()) return 0;  // nothing sent: Beast reads end_of_stream
      ec = {};
      parser.put_eof(ec);
      break;
    }
    if (ec) break;
  }
  if (ec) {
    if (auto refusal = pinfer::http::RefusalForReadError(ec, limits)) {
      CheckErrorBody(refusal->status, refusal->message);
    }
    return 0;
  }
  if (!parser.is_done()) return 0;
  const pinfer::http::Request req = pinfer::http::ToRequest(parser.release(), "127.0.0.1");
  if (req.body.size() > limits.max_body) __builtin_trap();
  CheckErrorBody(404, "no such endpoint: " + req.method + " " + req.path);
  for (const auto& [k, v] : req.headers) CheckErrorBody(400, k + ": " + v);
  CheckHead(req);
  return 0;
}
