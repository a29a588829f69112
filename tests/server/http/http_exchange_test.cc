// The HTTP layer's exchanges: streamed answers and keep-alive, a client hanging up while its
// handler works, 100-continue, HTTP/1.0, answers on the I/O thread while the handler pool
// is busy, and the graceful shutdown's steps.
#include <gtest/gtest.h>

#include <thread>

#include "server/http/http_server.h"
#include "tests/server/http/test_server.h"
#include "tests/server/http_client.h"

namespace pinfer::http {
namespace {

using pinfer::testing::ConnectTcp;
using pinfer::testing::HttpClient;
using pinfer::testing::PeerClosed;
using pinfer::testing::ReadFor;
using pinfer::testing::SendAll;
using pinfer::testing::StatusOf;
using testing::TestServer;

TEST(HttpExchangeTest, StreamedAnswersAreChunkedAndTheConnectionIsKeptAlive) {
  TestServer s(Limits{});
  HttpClient c(s.port());
  const auto r = c.Get("/stream?n=5");
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.Header("content-type"), "text/event-stream");
  EXPECT_EQ(r.Header("transfer-encoding"), "chunked");
  EXPECT_EQ(r.body,
            "data: {\"i\":0}\n\ndata: {\"i\":1}\n\ndata: {\"i\":2}\n\ndata: {\"i\":3}\n\n"
            "data: {\"i\":4}\n\ndata: [DONE]\n\n");
  EXPECT_EQ(c.Post("/echo", "hello").body, "5");
  EXPECT_EQ(s.server().stats().connections_accepted, 1) << "one kept-alive connection";
}

TEST(HttpExchangeTest, AClientThatHangsUpWhileItsHandlerWorksIsNoticed) {
  TestServer s(Limits{});
  const int fd = ConnectTcp(s.port());
  ASSERT_TRUE(SendAll(fd, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(s.WaitHeld(1, 5000));
  ::close(fd);
  for (int i = 0; i < 100 && s.hangups.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(s.hangups.load(), 1);
  EXPECT_EQ(s.server().stats().client_disconnects, 1);
  EXPECT_EQ(s.server().stats().in_flight, 0);
}

TEST(HttpExchangeTest, PipelinedBytesWhileAHandlerWorksAreKeptForTheNextRequest) {
  TestServer s(Limits{});
  const int fd = ConnectTcp(s.port());
  ASSERT_TRUE(
      SendAll(fd, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(s.WaitHeld(1, 5000));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  s.Release();
  const std::string got = ReadFor(fd, 5000, "\r\n\r\nok");
  ::close(fd);
  EXPECT_NE(got.find("released"), std::string::npos) << got;
  EXPECT_NE(got.find("\r\n\r\nok"), std::string::npos) << got;
  EXPECT_EQ(s.hangups.load(), 0);
}

TEST(HttpExchangeTest, ExpectContinueGetsA100BeforeTheBody) {
  TestServer s(Limits{});
  const int fd = ConnectTcp(s.port());
  ASSERT_TRUE(SendAll(fd,
                      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                      "Expect: 100-continue\r\n\r\n"));
  EXPECT_EQ(StatusOf(ReadFor(fd, 5000, "\r\n\r\n")), 100);
  ASSERT_TRUE(SendAll(fd, "hello"));
  const std::string got = ReadFor(fd, 5000, "\r\n\r\n5");
  ::close(fd);
  EXPECT_EQ(StatusOf(got), 200) << got;
}

TEST(HttpExchangeTest, Http10GetsItsAnswerAndAClose) {
  TestServer s(Limits{});
  const int fd = ConnectTcp(s.port());
  ASSERT_TRUE(SendAll(fd, "GET /stream?n=2 HTTP/1.0\r\n\r\n"));
  const std::string got = ReadFor(fd, 5000);
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.0 200", 0), 0u) << got;
  EXPECT_EQ(got.find("chunked"), std::string::npos);
  EXPECT_NE(got.find("data: [DONE]\n\n"), std::string::npos);
}

TEST(HttpExchangeTest, IoThreadRoutesAnswerWhileEveryPoolThreadIsBusy) {
  TestServer s(Limits{}, /*handler_threads=*/1);
  std::thread blocked([&] { HttpClient(s.port()).Get("/block"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::thread queued([&] { HttpClient(s.port()).Post("/echo", "x"); });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(HttpClient(s.port()).Get("/health").status, 200);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s.echoes.load(), 0) << "the pool thread is still blocked";
  s.Release();
  blocked.join();
  queued.join();
  EXPECT_EQ(s.echoes.load(), 1);
  EXPECT_LT(secs, 2.0);
}

TEST(HttpExchangeTest, ShutdownRefusesNewWorkAndWaitsForTheAnswersInFlight) {
  Limits l;
  l.keep_alive_timeout = std::chrono::milliseconds(20'000);
  TestServer s(l);
  // An idle kept-alive connection, and one whose request is being handled.
  const int idle = ConnectTcp(s.port());
  ASSERT_TRUE(SendAll(idle, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_EQ(StatusOf(ReadFor(idle, 5000, "ok")), 200);
  const int busy = ConnectTcp(s.port());
  ASSERT_TRUE(SendAll(busy, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(s.WaitHeld(1, 5000));

  s.server().BeginShutdown();
  EXPECT_TRUE(PeerClosed(idle, 5000)) << "idle connections close at once";
  EXPECT_FALSE(s.server().WaitForIdle(std::chrono::milliseconds(200)));
  EXPECT_LT(ConnectTcp(s.port()), 0) << "no new connections";
  s.Release();
  EXPECT_TRUE(s.server().WaitForIdle(std::chrono::milliseconds(5000)));
  const std::string got = ReadFor(busy, 5000, "released");
  EXPECT_EQ(StatusOf(got), 200);
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  ::close(idle);
  ::close(busy);
}

}  // namespace
}  // namespace pinfer::http
