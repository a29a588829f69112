#include "server/http/server_shared.h"

namespace pinfer::http {

bool ServerShared::Admit(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu);
  int& from_client = per_client[address];
  if (stats.connections_open >= limits().max_connections ||
      from_client >= limits().max_connections_per_client) {
    if (from_client == 0) per_client.erase(address);
    ++stats.connections_refused;
    return false;
  }
  ++from_client;
  ++stats.connections_open;
  ++stats.connections_accepted;
  return true;
}

void ServerShared::Register(Connection* c, std::weak_ptr<Connection> w) {
  std::lock_guard<std::mutex> lock(mu);
  connections[c] = std::move(w);
}

void ServerShared::Release(Connection* c, const std::string& address) {
  std::lock_guard<std::mutex> lock(mu);
  connections.erase(c);
  --stats.connections_open;
  if (auto it = per_client.find(address); it != per_client.end() && --it->second <= 0) {
    per_client.erase(it);
  }
}

void ServerShared::RequestStarted() {
  std::lock_guard<std::mutex> lock(mu);
  ++stats.requests;
  ++stats.in_flight;
}

void ServerShared::RequestEnded() {
  std::lock_guard<std::mutex> lock(mu);
  if (--stats.in_flight == 0) idle_cv.notify_all();
}

void ServerShared::Count(int64_t ServerStats::*field) {
  std::lock_guard<std::mutex> lock(mu);
  ++(stats.*field);
}

Response ServerShared::ErrorPage(int status, const std::string& message) const {
  if (config.error_page) {
    Response r = config.error_page(status, message);
    r.status = status;
    return r;
  }
  Response r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = message + "\n";
  return r;
}

}  // namespace pinfer::http
