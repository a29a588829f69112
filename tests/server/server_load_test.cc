// Load and cancellation against an in-process OpenAiServer on a loopback port, with a KV pool
// too small for the requests in flight and a short waiting queue: every request gets the
// greedy answer it gets alone, or a clear 503; cancelled streams free their blocks.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <mutex>
#include <thread>

#include "engine/model/model.h"
#include "nlohmann/json.hpp"
#include "server/openai_server.h"
#include "tests/testing/test_models.h"

namespace pinfer::server {
namespace {

using json = nlohmann::json;

class ServerLoadTest : public ::testing::Test {
 protected:
  void Start(const std::string& path) {
    std::signal(SIGPIPE, SIG_IGN);
    auto model = Model::Load(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    EngineConfig c;
    c.max_model_len = 128;
    c.max_num_seqs = 8;
    c.max_waiting = 4;
    c.threads = 2;
    // 24 blocks of 16 tokens: two max_model_len sequences, far fewer than 8 running ones
    // could grow into; with no admission headroom decoding preempts.
    c.admission_headroom = 0;
    EngineConfig probe_config = c;
    probe_config.kv_cache_memory = 64 << 20;
    auto probe = Engine::Create(*model_, probe_config, nullptr, /*quiet=*/true);
    ASSERT_TRUE(probe.ok()) << probe.status();
    c.kv_cache_memory = (*probe)->KvReport().bytes_per_token * 16 * 24;
    auto engine = Engine::Create(*model_, c, nullptr, true);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    ServerOptions so;
    so.port = 0;
    so.model_id = "stories260K";
    so.http_threads = 48;
    server_ = std::make_unique<OpenAiServer>(*engine_, so);
    auto port = server_->Bind();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    listener_ = std::thread([this] { server_->Listen(); });
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (listener_.joinable()) listener_.join();
    server_.reset();
  }

  httplib::Client Client() {
    httplib::Client cli("127.0.0.1", port_);
    cli.set_read_timeout(60, 0);
    return cli;
  }
  int64_t Metric(const std::string& name) {
    auto res = Client().Get("/metrics");
    if (!res || res->status != 200) return -1;
    const std::string key = "\npagedinfer_" + name + " ";
    const size_t at = res->body.find(key);
    return at == std::string::npos ? -1 : std::stoll(res->body.substr(at + key.size()));
  }
  bool WaitForNoBlocksUsed() {
    for (int i = 0; i < 100; ++i) {
      if (Metric("kv_blocks_used") == 0 && Metric("requests_running") == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<OpenAiServer> server_;
  std::thread listener_;
  int port_ = 0;
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
    auto res = Client().Post("/v1/completions", Body(p, 48).dump(), "application/json");
    ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
    alone.push_back(json::parse(res->body)["choices"][0]["text"].get<std::string>());
  }
  constexpr int kRequests = 200, kInFlight = 32;
  std::atomic<int> next{0}, ok{0}, busy{0}, wrong{0};
  std::mutex report_mu;
  std::vector<std::thread> clients;
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < kInFlight; ++c) {
    clients.emplace_back([&] {
      httplib::Client cli = Client();
      for (int i = next++; i < kRequests; i = next++) {
        const size_t k = static_cast<size_t>(i) % prompts.size();
        auto res = cli.Post("/v1/completions", Body(prompts[k], 48).dump(), "application/json");
        if (res && res->status == 200) {
          const json j = json::parse(res->body);
          const bool same =
              j["choices"][0]["text"] == alone[k] && !j["choices"][0]["finish_reason"].is_null();
          (same ? ok : wrong)++;
          if (!same) {
            std::lock_guard<std::mutex> lock(report_mu);
            std::printf("request %d (prompt %zu): got %s\n  want %s\n", i, k,
                        j["choices"][0].dump().c_str(), alone[k].c_str());
          }
        } else if (res && res->status == 503 && res->has_header("Retry-After") &&
                   json::parse(res->body)["error"]["message"].is_string()) {
          busy++;
        } else {
          wrong++;
          std::lock_guard<std::mutex> lock(report_mu);
          std::printf("request %d: status %d body %s\n", i, res ? res->status : -1,
                      res ? res->body.c_str() : "(no response)");
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
  auto health = Client().Get("/health");
  ASSERT_TRUE(health && health->status == 200);
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
  auto res = Client().Post("/v1/completions", Body("The cat", 8).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(ServerLoadTest, ErrorsUseOpenAiShapes) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  Start(path);
  auto res = Client().Post("/v1/completions", "{oops", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_TRUE(json::parse(res->body)["error"].contains("param"));
  res = Client().Post("/v1/completions", Body("Hi", 1000).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "max_tokens");
  // A body over --max-body (1 MiB by default) is refused before it is parsed.
  res = Client().Post("/v1/completions", Body(std::string(2 << 20, 'a'), 8).dump(),
                      "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  EXPECT_EQ(json::parse(res->body)["error"]["code"], "request_too_large");
  res = Client().Post("/v1/nothing", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(json::parse(res->body)["error"]["code"], "not_found");
  res = Client().Get("/v1/memory");
  ASSERT_TRUE(res && res->status == 200);
  const json mem = json::parse(res->body);
  EXPECT_TRUE(mem.contains("ledger") && mem.contains("kv"));
}

}  // namespace
}  // namespace pinfer::server
