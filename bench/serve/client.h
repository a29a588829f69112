// The benchmark's HTTP client (Boost.Beast over Asio, one thread): sends a workload to an
// OpenAI-compatible server as streamed completions, each request at its arrival time, with
// at most max_concurrency in flight (later arrivals wait for a free slot, and their times are
// measured from when they are sent, as in vLLM's benchmark), one connection per request.
// Every request ends with a RequestResult: a refusal (HTTP 503, 429, ...), a broken stream,
// an error event or a timeout makes it a failed one with its error, and the run goes on.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/serve/stats.h"
#include "bench/serve/url.h"

namespace pinfer::bench_serve {

struct ClientOptions {
  BaseUrl url;
  std::string api_key;  // "": no Authorization header
  std::string model;    // "": the request names none
  bool chat = false;    // /chat/completions with one user message (text prompts only)
  bool ignore_eos = true;
  double temperature = 0;
  // A connect, or a wait for the next bytes of a response, longer than this fails the request.
  double request_timeout_s = 600;
};

struct BenchRequest {
  std::vector<int32_t> prompt_ids;  // a token-id prompt, or (when empty)
  std::string prompt_text;          // a text prompt
  int prompt_len = 0;               // its tokens, for the report
  int output_len = 0;               // max_tokens
  double arrival_s = 0;             // seconds from the run's start
};

// The JSON body sent for r (model, prompt or messages, max_tokens, stream with usage,
// temperature, ignore_eos).
std::string RequestBody(const ClientOptions& o, const BenchRequest& r);

struct Progress {
  int total = 0, finished = 0, failed = 0, in_flight = 0, waiting = 0;
  double elapsed_s = 0;
};
using ProgressFn = std::function<void(const Progress&)>;

struct RunOutcome {
  std::vector<RequestResult> results;  // in workload order
  double duration_s = 0;               // first arrival to the last request's end
  int peak_in_flight = 0;
};

// Runs the workload; max_concurrency 0: no cap. progress (may be empty) is called every
// progress_interval_s and once at the end. Error only when the host cannot be resolved.
absl::StatusOr<RunOutcome> RunBenchmark(const ClientOptions& o,
                                        const std::vector<BenchRequest>& requests,
                                        int max_concurrency, const ProgressFn& progress,
                                        double progress_interval_s = 1.0);

struct HttpReply {
  int status = 0;
  std::string body;
};
// One plain request (GET when body is empty, else POST of JSON) to target, e.g. "/tokenize".
// Error when the server cannot be reached or the response is broken; any HTTP status is a
// reply.
absl::StatusOr<HttpReply> HttpCall(const BaseUrl& url, const std::string& target,
                                   const std::string& body, const std::string& api_key,
                                   double timeout_s = 60);

}  // namespace pinfer::bench_serve
