// What one connection, one request and the whole server may hold: bytes, time, connections.
// Every limit is enforced on what actually arrives (a chunked body counts its decoded bytes;
// a compressed body is refused, never inflated), so no client can make the server hold more
// than these figures say.
#pragma once

#include <chrono>
#include <cstddef>

namespace pinfer::http {

struct Limits {
  size_t max_body = 1 << 20;             // decoded body bytes (chunked included): 413 beyond
  size_t max_header_bytes = 32 << 10;    // request line + headers: 431 beyond
  int max_headers = 100;                 // header fields: 431 beyond
  int max_connections = 1024;            // open connections in all: more are refused (503)
  int max_connections_per_client = 256;  // per client IP address: more are refused (503)
  // From a request's first byte to its last body byte. A client that drips its request
  // (one header line every few seconds) is disconnected when this passes.
  std::chrono::milliseconds request_timeout{30'000};
  // Waiting for the next request on a kept-alive connection (and for the first byte of a new
  // connection's first request).
  std::chrono::milliseconds keep_alive_timeout{5'000};
  // One write (a response, or one streamed chunk) to a client that does not read.
  std::chrono::milliseconds write_timeout{60'000};
  // Response bytes queued for a connection (a stream that outruns its reader): beyond this
  // the connection is closed.
  size_t max_pending_write = 16 << 20;
  // After an error answer the connection is closed; its unread input is drained for at most
  // this long first, so that the client sees the answer and not a reset.
  std::chrono::milliseconds linger_timeout{2'000};
};

}  // namespace pinfer::http
