#include "server/http/http_server.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "server/http/connection.h"
#include "server/http/listener.h"

namespace pinfer::http {

namespace net = boost::asio;

class ServerCore {
 public:
  ServerCore(Router router, ServerConfig config)
      : shared(std::make_shared<ServerShared>(std::move(router), std::move(config))),
        pool(static_cast<size_t>(std::max(1, shared->config.handler_threads))),
        work(net::make_work_guard(io)),
        listener(std::make_shared<Listener>(io, shared)) {
    shared->pool = &pool;
  }

  // Declared in this order so that the io_context (and with it every connection its
  // handlers hold) goes before the state they share.
  std::shared_ptr<ServerShared> shared;
  net::thread_pool pool;
  net::io_context io;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::shared_ptr<Listener> listener;
  std::mutex run_mu;
  bool stopped = false;  // guarded by run_mu
  bool listening = false;
  std::vector<std::thread> threads;  // guarded by run_mu

  void CloseAll() {
    std::vector<std::shared_ptr<Connection>> open;
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      for (auto& [ptr, weak] : shared->connections) {
        if (auto c = weak.lock()) open.push_back(std::move(c));
      }
    }
    for (auto& c : open) c->Abort();
  }
};

Server::Server(Router router, ServerConfig config)
    : core_(std::make_unique<ServerCore>(std::move(router), std::move(config))) {}

Server::~Server() {
  Stop();
  // The I/O threads are gone; handlers still queued on the pool run (they may post, which
  // is refused now), then the pool ends before the io_context does.
  core_->pool.join();
}

absl::StatusOr<int> Server::Bind(const std::string& host, int port) {
  absl::StatusOr<int> p = core_->listener->Bind(host, port);
  if (p.ok()) core_->listening = true;
  return p;
}

void Server::Run() {
  {
    std::lock_guard<std::mutex> lock(core_->run_mu);
    if (core_->stopped) return;
    if (core_->listening) core_->listener->Start();
    for (int i = 1; i < std::max(1, core_->shared->config.io_threads); ++i) {
      core_->threads.emplace_back([this] { core_->io.run(); });
    }
  }
  core_->io.run();
}

void Server::BeginShutdown() {
  {
    std::lock_guard<std::mutex> lock(core_->shared->mu);
    core_->shared->draining = true;
    core_->shared->draining_flag.store(true);
  }
  core_->listener->Stop();
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard<std::mutex> lock(core_->shared->mu);
    for (auto& [ptr, weak] : core_->shared->connections) {
      if (auto c = weak.lock()) open.push_back(std::move(c));
    }
  }
  for (auto& c : open) c->Drain();
}

bool Server::WaitForIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(core_->shared->mu);
  return core_->shared->idle_cv.wait_for(lock, timeout,
                                         [&] { return core_->shared->stats.in_flight == 0; });
}

void Server::Stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(core_->run_mu);
    if (core_->stopped) return;
    core_->stopped = true;
    threads.swap(core_->threads);
  }
  core_->listener->Stop();
  core_->CloseAll();
  // Let the closes run, then end the loop.
  core_->work.reset();
  net::post(core_->io, [this] { core_->io.stop(); });
  for (std::thread& t : threads) t.join();
  {
    std::unique_lock<std::shared_mutex> lock(core_->shared->post_mu);
    core_->shared->open = false;
  }
  core_->io.stop();
}

ServerStats Server::stats() const {
  std::lock_guard<std::mutex> lock(core_->shared->mu);
  return core_->shared->stats;
}

const Limits& Server::limits() const { return core_->shared->limits(); }

}  // namespace pinfer::http
