// An in-process OpenAiServer over stories260K on a loopback port, for the server's load and
// reliability tests. Include "server/openai_server.h" in the test too (libraries_for).
#pragma once

#include <gtest/gtest.h>

#include <csignal>
#include <memory>
#include <string>
#include <thread>

#include "engine/model/model.h"
#include "nlohmann/json.hpp"
#include "server/openai_server.h"
#include "tests/server/http_client.h"
#include "tests/testing/test_models.h"

namespace pinfer::server::testing {

class ServerFixture : public ::testing::Test {
 protected:
  // pool_blocks > 0: a KV pool of that many blocks (block_size tokens each), else 64 MiB.
  void Start(const std::string& path, EngineConfig c, ServerOptions so, int pool_blocks = 0) {
    std::signal(SIGPIPE, SIG_IGN);
    auto model = Model::Load(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    c.kv_cache_memory = 64 << 20;
    if (pool_blocks > 0) {
      auto probe = Engine::Create(*model_, c, nullptr, /*quiet=*/true);
      ASSERT_TRUE(probe.ok()) << probe.status();
      c.kv_cache_memory = (*probe)->KvReport().bytes_per_token * c.block_size * pool_blocks;
    }
    auto engine = Engine::Create(*model_, c, nullptr, true);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    so.port = 0;
    if (so.model_id.empty()) so.model_id = "stories260K";
    server_ = std::make_unique<OpenAiServer>(*engine_, so);
    auto port = server_->Bind();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    listener_ = std::thread([this] { server_->Listen(); });
  }
  // Start() over stories260K with a CPU engine of this context and batch (2 threads); the
  // test is skipped, naming the folder, when the model is absent.
  void StartStories(int max_model_len, int max_num_seqs) {
    PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
    EngineConfig c;
    c.max_model_len = max_model_len;
    c.max_num_seqs = max_num_seqs;
    c.threads = 2;
    Start(path, c, ServerOptions());
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (listener_.joinable()) listener_.join();
    server_.reset();
  }

  // POSTs a JSON body, expecting status `want`; the answer parsed (discarded if not JSON).
  nlohmann::json PostJson(const std::string& path, const nlohmann::json& body, int want = 200) {
    auto r = pinfer::testing::HttpClient(port_).Post(path, body.dump());
    EXPECT_EQ(r.status, want) << r.body;
    return nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  }

  // A pagedinfer_* figure from /metrics, -1 if absent.
  int64_t Metric(const std::string& name) {
    return static_cast<int64_t>(pinfer::testing::MetricOf(port_, "pagedinfer_" + name));
  }
  // Until no request is in flight (every answer written) and the engine holds no blocks and
  // runs or queues nothing.
  bool WaitForNoBlocksUsed(int timeout_ms = 10'000) {
    for (int waited = 0; waited < timeout_ms; waited += 100) {
      if (server_->http_stats().in_flight == 0 && Metric("kv_blocks_used") == 0 &&
          Metric("requests_running") == 0 && Metric("requests_waiting") == 0) {
        return true;
      }
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

}  // namespace pinfer::server::testing
