// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// (keep <utility> first)
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "bench/serve/client.h"
#include "bench/serve/events.h"
#include "bench/serve/sse.h"
#include "nlohmann/json.hpp"

namespace pinfer::bench_serve {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using asio::awaitable;
using json = nlohmann::json;

constexpr auto kUse = asio::use_awaitable;
auto Tok(beast::error_code& ec) { return asio::redirect_error(kUse, ec); }

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
Clock::duration Span(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

http::request<http::string_body> MakeRequest(const BaseUrl& url, const std::string& target,
                                             const std::string& body, const std::string& key,
                                             bool stream) {
  http::request<http::string_body> req{body.empty() ? http::verb::get : http::verb::post, target,
                                       11};
  req.set(http::field::host, url.HostHeader());
  req.set(http::field::user_agent, "pagedinfer-bench-serve");
  if (!key.empty()) req.set(http::field::authorization, "Bearer " + key);
  if (stream) req.set(http::field::accept, "text/event-stream");
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();
  return req;
}

absl::StatusOr<tcp::resolver::results_type> Resolve(asio::io_context& io, const BaseUrl& url) {
  tcp::resolver resolver(io);
  beast::error_code ec;
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", url.HostHeader(), ": ", ec.message()));
  }
  return endpoints;
}

class Runner {
 public:
  Runner(const ClientOptions& o, const std::vector<BenchRequest>& reqs, int cap,
         const ProgressFn& progress, double interval)
      : o_(o), reqs_(reqs), cap_(cap), progress_(progress), interval_(interval), timer_(io_) {
    target_ = o.url.Under(o.chat ? "/chat/completions" : "/completions");
    for (const BenchRequest& r : reqs) bodies_.push_back(RequestBody(o, r));
    out_.results.resize(reqs.size());
  }

  absl::StatusOr<RunOutcome> Run() {
    auto endpoints = Resolve(io_, o_.url);
    if (!endpoints.ok()) return endpoints.status();
    endpoints_ = *endpoints;
    start_ = end_ = Clock::now();
    if (!reqs_.empty()) {
      asio::co_spawn(io_, Dispatch(), asio::detached);
      if (progress_) asio::co_spawn(io_, Report(), asio::detached);
      io_.run();
    }
    out_.duration_s = Seconds(end_ - start_);
    if (progress_) progress_(Snapshot());
    return std::move(out_);
  }

 private:
  Progress Snapshot() const {
    Progress p;
    p.total = static_cast<int>(reqs_.size());
    p.finished = finished_;
    p.failed = failed_;
    p.in_flight = in_flight_;
    p.waiting = static_cast<int>(waiting_.size());
    p.elapsed_s = Seconds((finished_ == p.total ? end_ : Clock::now()) - start_);
    return p;
  }

  awaitable<void> Dispatch() {
    asio::steady_timer at(io_);
    beast::error_code ec;
    for (size_t i = 0; i < reqs_.size(); ++i) {
      const auto when = start_ + Span(reqs_[i].arrival_s);
      if (Clock::now() < when) {
        at.expires_at(when);
        co_await at.async_wait(Tok(ec));
      }
      if (cap_ <= 0 || in_flight_ < cap_) {
        Start(i);
      } else {
        waiting_.push_back(i);
      }
    }
  }

  awaitable<void> Report() {
    beast::error_code ec;
    while (finished_ < static_cast<int>(reqs_.size())) {
      timer_.expires_after(Span(interval_));
      co_await timer_.async_wait(Tok(ec));
      if (finished_ < static_cast<int>(reqs_.size())) progress_(Snapshot());
    }
  }

  void Start(size_t i) {
    ++in_flight_;
    out_.peak_in_flight = std::max(out_.peak_in_flight, in_flight_);
    asio::co_spawn(io_, RunOne(i), asio::detached);
  }

  awaitable<void> RunOne(size_t i) {
    RequestResult& r = out_.results[i];
    r.prompt_len = reqs_[i].prompt_len;
    const Clock::time_point t0 = Clock::now();
    r.start_s = Seconds(t0 - start_);
    try {
      co_await Execute(i, t0, r);
    } catch (const std::exception& e) {
      r.success = false;
      r.error = absl::StrCat("client error: ", e.what());
      r.latency_s = Seconds(Clock::now() - t0);
    }
    --in_flight_;
    ++finished_;
    if (!r.success) ++failed_;
    if (!waiting_.empty()) {
      const size_t next = waiting_.front();
      waiting_.pop_front();
      Start(next);
    }
    if (finished_ == static_cast<int>(reqs_.size())) {
      end_ = Clock::now();
      timer_.cancel();
    }
  }

  awaitable<void> Execute(size_t i, Clock::time_point t0, RequestResult& r) {
    auto since = [t0] { return Seconds(Clock::now() - t0); };
    auto fail = [&](const std::string& what, const beast::error_code& ec) {
      r.success = false;
      r.error = absl::StrCat(what, ": ", ec.message());
      r.latency_s = since();
    };
    beast::error_code ec;
    beast::tcp_stream stream(io_);
    const Clock::duration timeout = Span(o_.request_timeout_s);
    stream.expires_after(timeout);
    co_await stream.async_connect(endpoints_, Tok(ec));
    if (ec) co_return fail(absl::StrCat("cannot connect to ", o_.url.HostHeader()), ec);
    stream.socket().set_option(tcp::no_delay(true), ec);  // the request goes out at once
    auto req = MakeRequest(o_.url, target_, bodies_[i], o_.api_key, /*stream=*/true);
    co_await http::async_write(stream, req, Tok(ec));
    if (ec) co_return fail("sending the request", ec);
    beast::flat_buffer buf;
    http::response_parser<http::buffer_body> parser;
    // No limit on a stream (Boost 1.74 mishandles boost::none here: it refuses every body).
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    co_await http::async_read_header(stream, buf, parser, Tok(ec));
    if (ec) co_return fail("reading the response head", ec);
    const int status = parser.get().result_int();
    std::string error_body;
    StreamAccumulator acc(&r, o_.chat);
    SseParser sse;
    std::string transport_error;
    char chunk[16384];
    while (!parser.is_done()) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof(chunk);
      stream.expires_after(timeout);
      // read_some: back as soon as some body bytes arrived (read would fill the buffer first).
      co_await http::async_read_some(stream, buf, parser, Tok(ec));
      if (ec == http::error::need_buffer) ec = {};
      const size_t n = sizeof(chunk) - parser.get().body().size;
      if (n > 0 && status != 200) {
        if (error_body.size() < (64u << 10)) error_body.append(chunk, n);
      } else if (n > 0) {
        const double t = since();
        sse.Feed(std::string_view(chunk, n), [&](std::string_view d) { acc.OnEvent(d, t); });
      }
      if (ec) {
        transport_error = ec == beast::error::timeout
                              ? absl::StrCat("no data for ", o_.request_timeout_s, " s")
                              : ec.message();
        break;
      }
    }
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    if (status != 200) {
      r.success = false;
      r.error = HttpErrorText(status, error_body);
      r.latency_s = since();
      co_return;
    }
    const double t_end = since();
    if (transport_error.empty()) {
      sse.Finish([&](std::string_view d) { acc.OnEvent(d, t_end); });
    }
    acc.Finish(t_end, transport_error);
  }

  const ClientOptions& o_;
  const std::vector<BenchRequest>& reqs_;
  const int cap_;
  const ProgressFn& progress_;
  const double interval_;
  asio::io_context io_;
  asio::steady_timer timer_;  // the progress line's; cancelled at the end
  tcp::resolver::results_type endpoints_;
  std::string target_;
  std::vector<std::string> bodies_;
  Clock::time_point start_, end_;
  // Touched only on io_'s one thread:
  int in_flight_ = 0, finished_ = 0, failed_ = 0;
  std::deque<size_t> waiting_;
  RunOutcome out_;
};

awaitable<void> CallOnce(asio::io_context& io, const tcp::resolver::results_type& endpoints,
                         http::request<http::string_body> req, double timeout_s,
                         std::optional<absl::StatusOr<HttpReply>>* out) {
  beast::error_code ec;
  beast::tcp_stream stream(io);
  auto fail = [&](const char* what) {
    *out = absl::UnavailableError(
        absl::StrCat(what, " ", std::string(req.target()), ": ", ec.message()));
  };
  stream.expires_after(Span(timeout_s));
  co_await stream.async_connect(endpoints, Tok(ec));
  if (ec) co_return fail("cannot connect for");
  co_await http::async_write(stream, req, Tok(ec));
  if (ec) co_return fail("cannot send");
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  co_await http::async_read(stream, buf, parser, Tok(ec));
  if (ec) co_return fail("cannot read the response to");
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  *out = HttpReply{static_cast<int>(parser.get().result_int()), std::move(parser.get().body())};
}

}  // namespace

std::string RequestBody(const ClientOptions& o, const BenchRequest& r) {
  json j = json::object();
  if (!o.model.empty()) j["model"] = o.model;
  if (o.chat) {
    j["messages"] = json::array({{{"role", "user"}, {"content", r.prompt_text}}});
    j["max_completion_tokens"] = r.output_len;
  } else {
    j["prompt"] = r.prompt_ids.empty() ? json(r.prompt_text) : json(r.prompt_ids);
    j["max_tokens"] = r.output_len;
  }
  j["temperature"] = o.temperature;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  if (o.ignore_eos) j["ignore_eos"] = true;
  return j.dump();
}

absl::StatusOr<RunOutcome> RunBenchmark(const ClientOptions& o,
                                        const std::vector<BenchRequest>& requests,
                                        int max_concurrency, const ProgressFn& progress,
                                        double progress_interval_s) {
  Runner runner(o, requests, max_concurrency, progress, std::max(0.01, progress_interval_s));
  return runner.Run();
}

absl::StatusOr<HttpReply> HttpCall(const BaseUrl& url, const std::string& target,
                                   const std::string& body, const std::string& api_key,
                                   double timeout_s) {
  asio::io_context io;
  auto endpoints = Resolve(io, url);
  if (!endpoints.ok()) return endpoints.status();
  std::optional<absl::StatusOr<HttpReply>> out;
  asio::co_spawn(
      io, CallOnce(io, *endpoints, MakeRequest(url, target, body, api_key, false), timeout_s, &out),
      asio::detached);
  io.run();
  if (!out) return absl::InternalError("the HTTP call did not finish");
  return std::move(*out);
}

}  // namespace pinfer::bench_serve
