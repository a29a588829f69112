// The OpenAI server against clients that misbehave, with stories260K: hundreds of clients
// dripping their headers, clients that send a long request and leave, bodies over the limit,
// and a graceful shutdown with requests in flight.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/openai_server.h"
#include "tests/server/http/test_server.h"
#include "tests/server/http_client.h"
#include "tests/server/server_fixture.h"
#include "tests/testing/test_models.h"

namespace pinfer::server {
namespace {

using json = nlohmann::json;
using pinfer::testing::ConnectTcp;
using pinfer::testing::HttpClient;
using pinfer::testing::ReadFor;
using pinfer::testing::SendAll;
using pinfer::testing::StatusOf;

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string RawPost(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

json Long(const std::string& prompt, int max_tokens, bool stream) {
  return {{"prompt", prompt},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true},
          {"stream", stream}};
}

class ServerReliabilityTest : public testing::ServerFixture {
 protected:
  void Start(const std::string& path, ServerOptions so = {}, int max_num_seqs = 8) {
    EngineConfig c;
    c.max_model_len = 1024;
    c.max_num_seqs = max_num_seqs;
    c.max_waiting = 256;
    c.threads = 2;
    ServerFixture::Start(path, c, so);
  }
};

// 512 connections each sending one header line a second hold only sockets: /health and a
// completion on a fresh connection answer within 2 s while they drip.
TEST_F(ServerReliabilityTest, FiveHundredTwelveSlowClientsDoNotLockOthersOut) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  http::testing::RaiseDescriptorLimit();
  ServerOptions so;
  so.limits.max_connections = 2048;
  so.limits.max_connections_per_client = 1024;
  so.limits.request_timeout = std::chrono::seconds(120);
  Start(path, so);
  constexpr int kSlow = 512;
  std::vector<int> slow;
  for (int i = 0; i < kSlow; ++i) {
    const int fd = ConnectTcp(port_);
    ASSERT_GE(fd, 0) << "connection " << i;
    ASSERT_TRUE(SendAll(fd, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
    slow.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::thread dripper([&] {
    for (int line = 0; !stop; ++line) {
      for (int fd : slow) SendAll(fd, "X-Drip-" + std::to_string(line) + ": 1\r\n");
      for (int k = 0; k < 10 && !stop; ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  for (int i = 0; i < 100 && server_->http_stats().connections_open < kSlow; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(server_->http_stats().connections_open, kSlow);
  double worst_health = 0, worst_completion = 0;
  for (int round = 0; round < 3; ++round) {
    auto t0 = Clock::now();
    EXPECT_EQ(HttpClient(port_).Get("/health").status, 200);
    worst_health = std::max(worst_health, Since(t0));
    t0 = Clock::now();
    auto r = HttpClient(port_).Post("/v1/completions",
                                    json{{"prompt", "Once upon a time"}, {"max_tokens", 8}}.dump());
    worst_completion = std::max(worst_completion, Since(t0));
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
  }
  const int64_t still_open = server_->http_stats().connections_open;
  stop = true;
  dripper.join();
  for (int fd : slow) ::close(fd);
  std::printf(
      "%d dripping connections (%ld open at the end): /health within %.3f s, "
      "a completion within %.3f s\n",
      kSlow, (long)still_open, worst_health, worst_completion);
  EXPECT_GE(still_open, kSlow) << "the slow clients should still be connected";
  EXPECT_LT(worst_health, 2.0);
  EXPECT_LT(worst_completion, 2.0);
}

// Clients that send a long non-streamed request and hang up: each request is cancelled (its
// blocks freed) instead of running to its end, and /health is not held up.
TEST_F(ServerReliabilityTest, AbandonedNonStreamedRequestsAreCancelledAndFreeTheirBlocks) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  Start(path);
  constexpr int kAbandoned = 32, kTokens = 900;
  std::vector<int> fds;
  for (int i = 0; i < kAbandoned; ++i) {
    const int fd = ConnectTcp(port_);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(
        SendAll(fd, RawPost("/v1/completions", Long("Once upon a time", kTokens, false).dump())));
    fds.push_back(fd);
  }
  for (int i = 0; i < 100 && Metric("requests_accepted_total") < kAbandoned; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int fd : fds) ::close(fd);
  const auto t0 = Clock::now();
  EXPECT_EQ(HttpClient(port_).Get("/health").status, 200);
  const double health = Since(t0);
  for (int i = 0; i < 100 && Metric("requests_cancelled_total") < kAbandoned; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(WaitForNoBlocksUsed(10'000));
  const double freed = Since(t0);
  const int64_t cancelled = Metric("requests_cancelled_total");
  const int64_t generated = Metric("generation_tokens_total");
  std::printf(
      "%d abandoned: /health in %.3f s, all blocks free after %.2f s, %ld cancelled, "
      "%ld of %d tokens generated\n",
      kAbandoned, health, freed, (long)cancelled, (long)generated, kAbandoned * kTokens);
  EXPECT_LT(health, 2.0);
  EXPECT_EQ(cancelled, kAbandoned);
  EXPECT_LT(generated, kAbandoned * kTokens / 2);
  // The last /metrics answer counts as in flight until the server sees its write complete,
  // which may come just after the client has read it.
  for (int i = 0; i < 100 && server_->http_stats().in_flight != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->http_stats().in_flight, 0);
}

TEST_F(ServerReliabilityTest, StreamsWhoseClientsHangUpAreCancelled) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  Start(path, ServerOptions{}, /*max_num_seqs=*/4);
  constexpr int kStreams = 8, kTokens = 900;
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&] {
      const int fd = ConnectTcp(port_);
      SendAll(fd, RawPost("/v1/completions", Long("Once upon a time", kTokens, true).dump()));
      const std::string got = ReadFor(fd, 10'000, "data: ");  // the first event, then leave
      ::close(fd);
      EXPECT_EQ(StatusOf(got), 200) << got;
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < 100 && Metric("requests_cancelled_total") < kStreams; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(WaitForNoBlocksUsed(10'000));
  const int64_t cancelled = Metric("requests_cancelled_total");
  std::printf("%ld of %d streams cancelled; %ld of %d tokens generated\n", (long)cancelled,
              kStreams, (long)Metric("generation_tokens_total"), kStreams * kTokens);
  EXPECT_EQ(cancelled, kStreams);
}

TEST_F(ServerReliabilityTest, ChunkedBodyOverTheLimitIsRefusedInTheApiShape) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  Start(path);
  const int fd = ConnectTcp(port_);
  ASSERT_TRUE(SendAll(fd,
                      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                      "application/json\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = http::Chunk(std::string(65536, ' '));
  for (int i = 0; i < 40 && SendAll(fd, chunk); ++i) {
  }
  const std::string got = ReadFor(fd, 5000, "}}");
  ::close(fd);
  EXPECT_EQ(StatusOf(got), 413) << got.substr(0, 300);
  EXPECT_NE(got.find("\"code\":\"request_too_large\""), std::string::npos) << got;
  EXPECT_EQ(Metric("requests_accepted_total"), 0);
}

// What the fuzz targets found in requests (tests/fuzz/regressions/): bytes that are not UTF-8
// in a path or a header, quoted in the error's JSON, made nlohmann's dump() throw on the I/O
// thread (std::terminate: the whole server died, unauthenticated, in one packet); a content
// part whose type is not a string threw in the parser. Each now gets its error answer, and
// the server stays up.
TEST_F(ServerReliabilityTest, MalformedBytesGetErrorAnswersNotACrash) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  Start(path);
  struct Case {
    std::string request;
    int status;
  };
  const std::vector<Case> cases = {
      {"GET /\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n", 404},
      {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Encoding: \xc3\x28zip\r\n"
       "Content-Length: 2\r\n\r\n{}",
       415},
      {RawPost("/v1/chat/completions",
               R"({"messages": [{"role": "user", "content": [{"type": 1, "text": "x"}]}]})"),
       400}};
  for (const Case& c : cases) {
    const int fd = ConnectTcp(port_);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, c.request));
    const std::string got = ReadFor(fd, 10'000, "}}");
    ::close(fd);
    EXPECT_EQ(StatusOf(got), c.status) << got.substr(0, 300);
    const size_t body = got.find("\r\n\r\n");
    ASSERT_NE(body, std::string::npos) << got;
    const json j = json::parse(got.substr(body + 4), nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(j.contains("error") && j["error"]["message"].is_string()) << got;
  }
  EXPECT_EQ(HttpClient(port_).Get("/health").status, 200);
}

// Reads a streamed answer to its end (the chunked body's last chunk) or the timeout.
std::string ReadStream(int fd) { return ReadFor(fd, 30'000, "\r\n0\r\n\r\n"); }

// With more streams than run at once, some are still in flight when the shutdown deadline
// passes: each of those ends with an error event and [DONE]; a queued non-streamed request
// gets a 503; new connections are refused; Shutdown reports that everyone got an answer.
TEST_F(ServerReliabilityTest, ShutdownEndsStreamsWithAnErrorEventAndDoneAndOthersWith503) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  Start(path, ServerOptions{}, /*max_num_seqs=*/2);
  constexpr int kStreams = 12;
  std::vector<int> streams;
  for (int i = 0; i < kStreams; ++i) {
    const int fd = ConnectTcp(port_);
    ASSERT_TRUE(
        SendAll(fd, RawPost("/v1/completions", Long("Once upon a time", 900, true).dump())));
    streams.push_back(fd);
  }
  const int plain = ConnectTcp(port_);
  ASSERT_TRUE(SendAll(plain, RawPost("/v1/completions", Long("The cat", 900, false).dump())));
  for (int i = 0; i < 100 && Metric("requests_accepted_total") < kStreams + 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  bool clean = false;
  std::thread shutdown([&] { clean = server_->Shutdown(std::chrono::milliseconds(300)); });
  int errors = 0, completed = 0;
  for (int fd : streams) {
    const std::string got = ReadStream(fd);
    ::close(fd);
    EXPECT_EQ(StatusOf(got), 200);
    ASSERT_NE(got.find("data: [DONE]\n\n"), std::string::npos) << got.substr(got.size() - 300);
    EXPECT_NE(got.find("\r\n0\r\n\r\n"), std::string::npos) << "the chunked body must end";
    if (got.find("data: {\"error\"") != std::string::npos) {
      EXPECT_NE(got.find("shutting down"), std::string::npos);
      EXPECT_LT(got.find("data: {\"error\""), got.find("data: [DONE]"));
      ++errors;
    } else {
      ++completed;
    }
  }
  const std::string answer = ReadFor(plain, 30'000, "}}");
  ::close(plain);
  shutdown.join();
  std::printf("%d streams ended by the shutdown with an error event, %d finished before it\n",
              errors, completed);
  EXPECT_TRUE(clean);
  EXPECT_GT(errors, 0) << "12 streams of 900 tokens, 2 at a time, cannot all finish in 0.3 s";
  EXPECT_EQ(StatusOf(answer), 503) << answer;
  EXPECT_NE(answer.find("shutting_down"), std::string::npos) << answer;
  EXPECT_LT(ConnectTcp(port_), 0) << "no new connections once shutting down";
  server_->Stop();
  listener_.join();
  server_.reset();  // the engine thread is gone: the engine may be read here
  EXPECT_EQ(engine_->KvReport().blocks_used, 0);
}

}  // namespace
}  // namespace pinfer::server
