// An http::Server on a loopback port with a few test routes, run on its own thread:
//   GET  /health   answered on the I/O thread
//   POST /echo     (handler pool) answers the body's size
//   GET  /hold     (handler pool) keeps the exchange until Release(); counts hang-ups
//   GET  /stream   (handler pool) streams `n` server-sent events (query n=COUNT)
//   GET  /block    (handler pool) blocks its pool thread until Release()
#pragma once

#include <sys/resource.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/http/http_server.h"
#include "tests/testing/sanitizer.h"

namespace pinfer::http::testing {

class TestServer {
 public:
  explicit TestServer(Limits limits, int handler_threads = 2) {
    Router r;
    r.Add(
        "GET", "/health", [](auto ex) { ex->Respond(Text("ok")); }, RunOn::kIoThread);
    r.Add("POST", "/echo", [this](auto ex) {
      ++echoes;
      ex->Respond(Text(std::to_string(ex->request().body.size())));
    });
    r.Add("GET", "/hold", [this](auto ex) {
      ex->OnClose([this] { ++hangups; });
      std::lock_guard<std::mutex> lock(mu_);
      held_.push_back(ex);
      cv_.notify_all();
    });
    r.Add("GET", "/stream", [](auto ex) {
      const int n = ex->request().query.empty() ? 3 : std::stoi(ex->request().query.substr(2));
      Response head;
      head.content_type = "text/event-stream";
      ex->BeginStream(head);
      for (int i = 0; i < n; ++i) ex->Write(SseEvent("{\"i\":" + std::to_string(i) + "}"));
      ex->Write(SseEvent("[DONE]"));
      ex->End();
    });
    r.Add("GET", "/block", [this](auto ex) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return released_; });
      ex->Respond(Text("unblocked"));
    });
    ServerConfig c;
    c.limits = limits;
    c.io_threads = 2;
    c.handler_threads = handler_threads;
    server_ = std::make_unique<Server>(std::move(r), std::move(c));
    auto port = server_->Bind("127.0.0.1", 0);
    if (port.ok()) port_ = *port;
    thread_ = std::thread([this] { server_->Run(); });
  }
  ~TestServer() {
    Release();
    server_->Stop();
    thread_.join();
    held_.clear();
  }

  int port() const { return port_; }
  Server& server() { return *server_; }
  // Answers every held /hold exchange and unblocks /block.
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    for (auto& ex : held_) ex->Respond(Text("released"));
    held_.clear();
    cv_.notify_all();
  }
  bool WaitHeld(size_t n, int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                        [&] { return held_.size() >= n; });
  }

  std::atomic<int> echoes{0}, hangups{0};

 private:
  static Response Text(std::string s) {
    Response r;
    r.content_type = "text/plain";
    r.body = std::move(s);
    return r;
  }
  std::unique_ptr<Server> server_;
  std::thread thread_;
  int port_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Exchange>> held_;  // guarded by mu_
  bool released_ = false;                        // guarded by mu_
};

using pinfer::testing::kUnderSanitizer;  // memory figures mean nothing under sanitizers

// Resident memory of this process in bytes (VmRSS), 0 if unknown.
inline int64_t ResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

// Samples VmRSS every few milliseconds on a thread of its own; Peak() is the highest seen.
class RssSampler {
 public:
  RssSampler() : base_(ResidentBytes()), peak_(base_) {
    thread_ = std::thread([this] {
      while (!stop_) {
        const int64_t r = ResidentBytes();
        if (r > peak_) peak_ = r;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  ~RssSampler() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t Growth() const { return peak_ - base_; }

 private:
  const int64_t base_;
  std::atomic<int64_t> peak_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Raises this process's descriptor limit to its hard limit (the slow-client tests hold
// hundreds of sockets at both ends).
inline void RaiseDescriptorLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace pinfer::http::testing
