// The HTTP layer's bounds, each against a client that breaks it: a chunked body over the
// limit, a gzip bomb, 200,000 headers, too many header fields, a client that drips its
// request, idle connections, and the connection caps. Memory is measured where the point is
// memory.
#include <gtest/gtest.h>

#include <cstdio>
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
using testing::RssSampler;
using testing::TestServer;

// Sends `head`, then body pieces from next() until it returns empty, the server answers, or
// a send fails; returns the answer (what arrived within a few seconds after the last send).
template <typename Next>
std::string SendUntilAnswered(int fd, const std::string& head, Next next, size_t* sent) {
  *sent = 0;
  if (!SendAll(fd, head)) return "";
  std::string answer;
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) break;  // the answer (or a close) is there
    const std::string_view piece = next();
    if (piece.empty() || !SendAll(fd, piece)) break;
    *sent += piece.size();
  }
  return ReadFor(fd, 5000, "\r\n\r\n");
}

// The server holds at most the limit's worth of body (that much is a legitimate request)
// plus its per-connection buffers (under 1 MiB), never the 50 MB sent.
TEST(HttpLimitsTest, ChunkedBodyOverTheLimitIs413AndMemoryStaysAtTheLimit) {
  Limits l;
  l.max_body = 4 << 20;
  TestServer s(l);
  const int fd = ConnectTcp(s.port());
  ASSERT_GE(fd, 0);
  // 50 MB in 64 KiB chunks, generated on the fly from one buffer.
  const std::string chunk = Chunk(std::string(65536, 'x'));
  constexpr size_t kTotal = 50'000'000;
  size_t offered = 0;
  RssSampler rss;
  size_t sent = 0;
  const std::string answer = SendUntilAnswered(
      fd, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
      [&]() -> std::string_view {
        if (offered >= kTotal) return std::string_view(kLastChunk);
        offered += 65536;
        return chunk;
      },
      &sent);
  rss.Stop();
  ::close(fd);
  std::printf("sent %.1f MB before the answer; peak RSS grew by %.2f MiB (limit %.0f MiB)\n",
              sent / 1e6, rss.Growth() / 1048576.0, l.max_body / 1048576.0);
  EXPECT_EQ(StatusOf(answer), 413) << answer.substr(0, 200);
  EXPECT_EQ(s.echoes.load(), 0) << "the handler must never see an oversized body";
  if (!testing::kUnderSanitizer) {
    EXPECT_LT(rss.Growth(), static_cast<int64_t>(l.max_body) + (1 << 20));
  }
  EXPECT_LT(sent, kTotal) << "the server should stop reading at the limit";
}

TEST(HttpLimitsTest, ContentLengthOverTheLimitIs413BeforeTheBodyIsRead) {
  TestServer s(Limits{});
  const int fd = ConnectTcp(s.port());
  ASSERT_TRUE(SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n"));
  const std::string answer = ReadFor(fd, 5000, "\r\n\r\n");
  ::close(fd);
  EXPECT_EQ(StatusOf(answer), 413) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos);
}

// 400 MB of zeros through gzip: ~390 KB on the wire.
std::string GzipBomb() {
  std::string out;
  FILE* p = ::popen("head -c 419430400 /dev/zero | gzip -9 -c", "r");
  if (p == nullptr) return out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST(HttpLimitsTest, GzipBombIs415WithoutInflating) {
  const std::string bomb = GzipBomb();
  if (bomb.size() < 1000) GTEST_SKIP() << "gzip is not available to make the test body";
  TestServer s(Limits{});
  for (const char* encoding : {"gzip", "deflate", "br"}) {
    const int fd = ConnectTcp(s.port());
    ASSERT_GE(fd, 0);
    RssSampler rss;
    size_t sent = 0, at = 0;
    const std::string answer = SendUntilAnswered(
        fd,
        std::string("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: ") + encoding +
            "\r\nContent-Length: " + std::to_string(bomb.size()) + "\r\n\r\n",
        [&]() -> std::string_view {
          const std::string_view rest = std::string_view(bomb).substr(at, 65536);
          at += rest.size();
          return rest;
        },
        &sent);
    rss.Stop();
    ::close(fd);
    std::printf("%s: %zu of %zu compressed bytes sent; peak RSS grew by %.2f MiB\n", encoding, sent,
                bomb.size(), rss.Growth() / 1048576.0);
    EXPECT_EQ(StatusOf(answer), 415) << answer.substr(0, 200);
    if (!testing::kUnderSanitizer) {
      EXPECT_LT(rss.Growth(), static_cast<int64_t>(Limits{}.max_body));
    }
  }
  EXPECT_EQ(s.echoes.load(), 0);
}

TEST(HttpLimitsTest, TwoHundredThousandHeadersAre431) {
  TestServer s(Limits{});
  const int fd = ConnectTcp(s.port());
  ASSERT_GE(fd, 0);
  // 200,000 header lines of ~200 bytes (40 MB), generated as they are sent.
  const std::string value(180, 'v');
  int i = 0;
  std::string batch;
  RssSampler rss;
  size_t sent = 0;
  const std::string answer = SendUntilAnswered(
      fd, "GET /health HTTP/1.1\r\nHost: x\r\n",
      [&]() -> std::string_view {
        if (i >= 200000) return "\r\n";
        batch.clear();
        for (int k = 0; k < 256 && i < 200000; ++k, ++i) {
          batch += "X-Header-" + std::to_string(i) + ": " + value + "\r\n";
        }
        return batch;
      },
      &sent);
  rss.Stop();
  ::close(fd);
  std::printf("%.1f MB of headers sent before the answer; peak RSS grew by %.2f MiB\n", sent / 1e6,
              rss.Growth() / 1048576.0);
  EXPECT_EQ(StatusOf(answer), 431) << answer.substr(0, 200);
  if (!testing::kUnderSanitizer) {
    EXPECT_LT(rss.Growth(), 4 << 20);
  }
}

TEST(HttpLimitsTest, MoreHeaderFieldsThanTheCountLimitAre431) {
  Limits l;
  l.max_headers = 100;
  TestServer s(l);
  auto request = [&](int fields) {
    std::string req = "GET /health HTTP/1.1\r\nHost: x\r\n";
    for (int i = 1; i < fields; ++i) req += "X-" + std::to_string(i) + ": 1\r\n";
    req += "\r\n";
    const int fd = ConnectTcp(s.port());
    SendAll(fd, req);
    const std::string answer = ReadFor(fd, 5000, "\r\n\r\n");
    ::close(fd);
    return StatusOf(answer);
  };
  EXPECT_EQ(request(100), 200);
  EXPECT_EQ(request(101), 431);
}

TEST(HttpLimitsTest, AClientThatDripsItsRequestIsCutAtTheRequestDeadline) {
  Limits l;
  l.request_timeout = std::chrono::milliseconds(1000);
  TestServer s(l);
  const int fd = ConnectTcp(s.port());
  ASSERT_TRUE(SendAll(fd, "GET /health HTTP/1.1\r\n"));
  const auto t0 = std::chrono::steady_clock::now();
  bool closed = false;
  for (int i = 0; i < 40 && !closed; ++i) {  // one header line every 250 ms, for up to 10 s
    if (!SendAll(fd, "X-Drip-" + std::to_string(i) + ": 1\r\n")) break;
    closed = PeerClosed(fd, 250);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(fd);
  EXPECT_TRUE(closed || secs < 9) << "the dripping connection stayed open";
  EXPECT_LT(secs, 5.0);
  // The count is taken on the I/O thread just after the close the client saw.
  for (int i = 0; i < 100 && s.server().stats().timeouts == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(s.server().stats().timeouts, 1);
}

TEST(HttpLimitsTest, IdleConnectionsCloseAtTheKeepAliveDeadline) {
  Limits l;
  l.keep_alive_timeout = std::chrono::milliseconds(300);
  TestServer s(l);
  // A connection that never sends anything.
  const int silent = ConnectTcp(s.port());
  EXPECT_TRUE(PeerClosed(silent, 5000));
  ::close(silent);
  // A connection kept alive after one answer.
  const int fd = ConnectTcp(s.port());
  ASSERT_TRUE(SendAll(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(StatusOf(ReadFor(fd, 5000, "ok")), 200);
  EXPECT_TRUE(PeerClosed(fd, 5000));
  ::close(fd);
}

TEST(HttpLimitsTest, ConnectionCapsPerClientAddressAndInAll) {
  Limits l;
  l.max_connections_per_client = 4;
  l.max_connections = 6;
  l.keep_alive_timeout = std::chrono::milliseconds(20'000);
  TestServer s(l);
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) held.push_back(ConnectTcp(s.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // A fifth from the same address is refused with 503...
  int fd = ConnectTcp(s.port());
  ASSERT_TRUE(SendAll(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(StatusOf(ReadFor(fd, 5000, "\r\n\r\n")), 503);
  ::close(fd);
  // ...while another client address is served.
  for (int i = 0; i < 2; ++i) {
    fd = ConnectTcp(s.port(), "127.0.0.1", "127.0.0.2");
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(StatusOf(ReadFor(fd, 5000, "ok")), 200);
    held.push_back(fd);
  }
  // Six open in all: a seventh, from a third address, is refused too.
  fd = ConnectTcp(s.port(), "127.0.0.1", "127.0.0.3");
  ASSERT_TRUE(SendAll(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(StatusOf(ReadFor(fd, 5000, "\r\n\r\n")), 503);
  ::close(fd);
  EXPECT_GE(s.server().stats().connections_refused, 2);
  // Closing frees the slots.
  for (int h : held) ::close(h);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(HttpClient(s.port()).Get("/health").status, 200);
}

TEST(HttpLimitsTest, MalformedAndUnsupportedRequestsGetTheirStatus) {
  TestServer s(Limits{});
  auto status_of = [&](const std::string& raw) {
    const int fd = ConnectTcp(s.port());
    SendAll(fd, raw);
    const std::string answer = ReadFor(fd, 5000, "\r\n\r\n");
    ::close(fd);
    return StatusOf(answer);
  };
  EXPECT_EQ(status_of("BLAH\r\n\r\n"), 400);
  EXPECT_EQ(
      status_of("GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
      501);
  EXPECT_EQ(status_of("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
            400);
  EXPECT_EQ(status_of("GET /health HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n"), 417);
  EXPECT_EQ(status_of("GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n"), 404);
  EXPECT_EQ(status_of("POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"), 405);
  EXPECT_EQ(HttpClient(s.port()).Get("/health").status, 200);
}

}  // namespace
}  // namespace pinfer::http
