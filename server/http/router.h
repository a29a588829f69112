// Which handler answers which method and path, and on which thread it runs: on the
// connection's I/O thread for answers that take microseconds and must never wait behind
// other work (/health, /metrics), on the handler pool for anything that parses or tokenizes.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "server/http/exchange.h"

namespace pinfer::http {

enum class RunOn { kIoThread, kHandlerPool };

class Router {
 public:
  // path is matched exactly (no patterns); the query string is not part of it.
  void Add(std::string method, std::string path, Handler handler,
           RunOn run_on = RunOn::kHandlerPool);
  // Answers what no route matches (e.g. a 404 in the API's error shape); runs on the I/O
  // thread. Without one the server answers 404 (405 for a known path) itself.
  void SetFallback(Handler handler) { fallback_ = std::move(handler); }

  struct Route {
    const Handler* handler = nullptr;  // nullptr: no route and no fallback
    RunOn run_on = RunOn::kIoThread;
    int status = 200;  // 404 or 405 when handler is the fallback (or nullptr)
  };
  Route Find(const std::string& method, const std::string& path) const;

 private:
  struct Entry {
    Handler handler;
    RunOn run_on;
  };
  std::map<std::pair<std::string, std::string>, Entry> routes_;  // (path, method)
  Handler fallback_;
};

}  // namespace pinfer::http
