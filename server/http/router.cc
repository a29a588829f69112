#include "server/http/router.h"

namespace pinfer::http {

void Router::Add(std::string method, std::string path, Handler handler, RunOn run_on) {
  routes_[{std::move(path), std::move(method)}] = Entry{std::move(handler), run_on};
}

Router::Route Router::Find(const std::string& method, const std::string& path) const {
  Route r;
  if (auto it = routes_.find({path, method}); it != routes_.end()) {
    r.handler = &it->second.handler;
    r.run_on = it->second.run_on;
    return r;
  }
  r.status = 404;
  auto it = routes_.lower_bound({path, std::string()});
  if (it != routes_.end() && it->first.first == path) r.status = 405;
  if (fallback_) r.handler = &fallback_;
  return r;
}

}  // namespace pinfer::http
