// What a streamed completion's events mean to the benchmark: the OpenAI chunk JSON of
// /v1/completions (choices[0].text) or /v1/chat/completions (choices[0].delta.content),
// usage (stream_options.include_usage, in its own chunk or beside the last choice, as
// llama-server sends it), an error event ({"error": {...}}, sent when a server fails after
// the HTTP status went out) and the closing [DONE]. A chunk that carries text is a token
// arrival: the first gives the time to first token, each later one an inter-token gap
// (several tokens in one chunk count as one arrival, as in vLLM's benchmark).
#pragma once

#include <string>
#include <string_view>

#include "bench/serve/stats.h"

namespace pinfer::bench_serve {

class StreamAccumulator {
 public:
  // result: where the request's figures go (prompt_len and start_s set by the caller).
  StreamAccumulator(RequestResult* result, bool chat) : r_(result), chat_(chat) {}

  // One event's data, arrived t_s seconds after the request was sent. Returns false once
  // the stream has failed (an error event or a chunk that is not JSON); later events are
  // ignored.
  bool OnEvent(std::string_view data, double t_s);
  // The body ended (cleanly: error_text empty; or cut: the transport's message) at t_s.
  // Sets success, error, latency and output_tokens.
  void Finish(double t_s, const std::string& transport_error);

  bool done() const { return done_; }

 private:
  RequestResult* r_;
  bool chat_;
  bool done_ = false;  // [DONE] seen
  bool failed_ = false;
  double last_t_ = 0;
};

// The message of an HTTP error response, for the request's error: "HTTP 503: <message>",
// the message taken from OpenAI's {"error": {"message": ...}} (or {"error": "..."}) when the
// body is such JSON, else the body's start.
std::string HttpErrorText(int status, std::string_view body);

}  // namespace pinfer::bench_serve
