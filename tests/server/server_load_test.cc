// Load and cancellation against an in-process OpenAiServer on a loopback port, with a KV pool
// too small for the requests in flight and a short waiting queue: every request gets the
// greedy answer it gets alone, or a clear 503; cancelled streams free their blocks.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "nlohmann/json.hpp"
#include "server/openai_server.h"
#include "tests/server/http_client.h"
#include "tests/server/server_fixture.h"
#include "tests/testing/test_models.h"

namespace pinfer::server {
namespace {

using json = nlohmann::json;
using pinfer::testing::HttpClient;

class ServerLoadTest : public testing::ServerFixture {
 protected:
  void Start(const std::string& path) {
    EngineConfig c;
    c.max_model_len = 128;
    c.max_num_seqs = 8;
    c.max_waiting = 4;
    c.threads = 2;
    // 24 blocks of 16 tokens: two max_model_len sequences, far fewer than 8 running ones
    // could grow into; with no admission headroom decoding preempts.
    c.admission_headroom = 0;
    ServerFixture::Start(path, c, ServerOptions{}, /*pool_blocks=*/24);
  }
};

json Body(const std::string& prompt, int max_tokens) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

TEST_F(ServerLoadTest, TwoHundredRequestsThirtyTwoInFlightGetTheirAloneAnswerOr503) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  Start(path);
  const std::vector<std::string> prompts = {"Once upon a time",  "The cat",     "Lily and Ben",
                                            "One day, a little", "The sun was", "Tom had a"};
  std::vector<std::string> alone;
  for (const std::string& p : prompts) {  // each prompt run alone first
    auto res = HttpClient(port_).Post("/v1/completions", Body(p, 48).dump());
    ASSERT_EQ(res.status, 200) << res.body << res.error;
    alone.push_back(json::parse(res.body)["choices"][0]["text"].get<std::string>());
  }
  constexpr int kRequests = 200, kInFlight = 32;
  std::atomic<int> next{0}, ok{0}, busy{0}, wrong{0};
  std::mutex report_mu;
  std::vector<std::thread> clients;
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < kInFlight; ++c) {
    clients.emplace_back([&] {
      HttpClient cli(port_);
      for (int i = next++; i < kRequests; i = next++) {
        const size_t k = static_cast<size_t>(i) % prompts.size();
        auto res = cli.Post("/v1/completions", Body(prompts[k], 48).dump());
        if (res.status == 200) {
          const json j = json::parse(res.body);
          const bool same =
              j["choices"][0]["text"] == alone[k] && !j["choices"][0]["finish_reason"].is_null();
          (same ? ok : wrong)++;
          if (!same) {
            std::lock_guard<std::mutex> lock(report_mu);
            std::printf("request %d (prompt %zu): got %s\n  want %s\n", i, k,
                        j["choices"][0].dump().c_str(), alone[k].c_str());
          }
        } else if (res.status == 503 && !res.Header("retry-after").empty() &&
                   json::parse(res.body)["error"]["message"].is_string()) {
          busy++;
        } else {
          wrong++;
          std::lock_guard<std::mutex> lock(report_mu);
          std::printf("request %d: status %d body %s %s\n", i, res.status, res.body.c_str(),
                      res.error.c_str());
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d ok, %d refused with 503, %d wrong in %.2f s; %ld preemptions\n", ok.load(),
              busy.load(), wrong.load(), secs, (long)Metric("preemptions_total"));
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(ok + busy, kRequests);
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(busy.load(), 0) << "32 in flight against 8 running + 4 waiting should see 503s";
  EXPECT_LT(secs, 120.0);
  EXPECT_EQ(HttpClient(port_).Get("/health").status, 200);
  EXPECT_TRUE(WaitForNoBlocksUsed());
  EXPECT_EQ(Metric("kv_blocks_used"), 0);
}

// Sends a streamed request on a raw socket, reads the first bytes, and hangs up.
void StreamAndHangUp(int port, const std::string& body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  char buf[512];
  std::string got;
  while (got.find("data: ") == std::string::npos) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  EXPECT_NE(got.find("200 OK"), std::string::npos) << got;
}

TEST_F(ServerLoadTest, ClientsThatHangUpMidStreamAreCancelledAndFreeTheirBlocks) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  Start(path);
  json body = Body("Once upon a time", 110);
  body["stream"] = true;
  body["ignore_eos"] = true;
  // Two waves of three, so the engine admits each wave before the next arrives (the waiting
  // queue holds 4).
  for (int wave = 0; wave < 2; ++wave) {
    std::vector<std::thread> hangups;
    for (int i = 0; i < 3; ++i) hangups.emplace_back([&] { StreamAndHangUp(port_, body.dump()); });
    for (std::thread& t : hangups) t.join();
  }
  EXPECT_TRUE(WaitForNoBlocksUsed());
  EXPECT_EQ(Metric("kv_blocks_used"), 0);
  std::printf("%ld of 6 streams cancelled before they ended\n",
              (long)Metric("requests_cancelled_total"));
  // The server still answers.
  EXPECT_EQ(HttpClient(port_).Post("/v1/completions", Body("The cat", 8).dump()).status, 200);
}

TEST_F(ServerLoadTest, ErrorsUseOpenAiShapes) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  Start(path);
  HttpClient c(port_);
  auto res = c.Post("/v1/completions", "{oops");
  EXPECT_EQ(res.status, 400);
  EXPECT_TRUE(json::parse(res.body)["error"].contains("param"));
  res = c.Post("/v1/completions", Body("Hi", 1000).dump());
  EXPECT_EQ(res.status, 400);
  EXPECT_EQ(json::parse(res.body)["error"]["param"], "max_tokens");
  // A body over --max-body (1 MiB by default) is refused before it is parsed.
  res = HttpClient(port_).Post("/v1/completions", Body(std::string(2 << 20, 'a'), 8).dump());
  EXPECT_EQ(res.status, 413);
  EXPECT_EQ(json::parse(res.body)["error"]["code"], "request_too_large");
  res = c.Post("/v1/nothing", "{}");
  EXPECT_EQ(res.status, 404);
  EXPECT_EQ(json::parse(res.body)["error"]["code"], "not_found");
  res = c.Get("/v1/memory");
  ASSERT_EQ(res.status, 200);
  const json mem = json::parse(res.body);
  EXPECT_TRUE(mem.contains("ledger") && mem.contains("kv"));
}

}  // namespace
}  // namespace pinfer::server
