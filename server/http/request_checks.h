// Internal to server/http (and its fuzz target): what the connection decides about a request
// from its parsed header alone, and how a parsed message becomes a handler's Request. Pure
// functions over Beast's message types; no sockets.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/error_code.hpp>
#include <optional>
#include <string>

#include "server/http/http_limits.h"
#include "server/http/http_message.h"

namespace pinfer::http {

using BeastRequest = boost::beast::http::request<boost::beast::http::string_body>;

// An answer the HTTP layer gives itself, before any handler sees the request.
struct Refusal {
  int status = 400;
  std::string message;
};

// The header's checks: HTTP version (505), header-field count (431), Content-Encoding other
// than identity (415), Transfer-Encoding other than chunked (501), both Content-Length and
// Transfer-Encoding (400), an Expect other than 100-continue (417).
std::optional<Refusal> CheckRequestHeader(const BeastRequest& req, const Limits& limits);

// A read error of Beast's parser as the refusal to send (431 header too large, 413 body too
// large, 400 malformed); nullopt when there is no one to answer (end of stream, reset,
// timeout, cancelled).
std::optional<Refusal> RefusalForReadError(const boost::system::error_code& ec,
                                           const Limits& limits);

// True when the client asked to be told to go on before it sends the body.
bool ExpectsContinue(const BeastRequest& req);

// The parsed message as a handler's Request (its body moved out).
Request ToRequest(BeastRequest&& msg, std::string remote_address);

}  // namespace pinfer::http
