// Internal to server/http: the state the listener, the connections and the Server share.
// Held by shared_ptr, so a connection that outlives the Server (kept for an instant by an
// Exchange on another thread) still finds it; `open` says whether posting to the I/O threads
// is still allowed.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "server/http/http_server.h"

namespace pinfer::http {

class Connection;

struct ServerShared {
  ServerShared(Router r, ServerConfig c) : router(std::move(r)), config(std::move(c)) {}

  const Router router;
  const ServerConfig config;
  const Limits& limits() const { return config.limits; }
  boost::asio::thread_pool* pool = nullptr;  // set while the server runs

  // Posting to the I/O threads takes post_mu shared; Stop takes it exclusively to set open
  // to false before the io_context goes away.
  std::shared_mutex post_mu;
  bool open = true;  // guarded by post_mu

  std::mutex mu;
  std::condition_variable idle_cv;  // notified when in_flight drops to 0
  bool draining = false;            // guarded by mu (mirrored in draining_flag)
  std::atomic<bool> draining_flag{false};
  std::map<std::string, int> per_client;                                   // guarded by mu
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections;  // guarded by mu
  ServerStats stats;                                                       // guarded by mu

  // Counts a new connection from `address`; false (and counts a refusal) over a cap.
  bool Admit(const std::string& address);
  void Register(Connection* c, std::weak_ptr<Connection> w);
  void Release(Connection* c, const std::string& address);  // a connection closed
  void RequestStarted();
  void RequestEnded();
  void Count(int64_t ServerStats::*field);
  Response ErrorPage(int status, const std::string& message) const;
};

}  // namespace pinfer::http
