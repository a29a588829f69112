// The Prometheus text exposition of the engine's KV occupancy, queue and token counters.
#pragma once

#include <string>

#include "engine/engine.h"
#include "server/engine_worker.h"
#include "server/http/http_server.h"

namespace pinfer::server {

std::string PrometheusText(const EngineStats& stats, const OccupancyReport& kv,
                           const WorkerCounters& counters);
// The HTTP layer's connection and request figures (pagedinfer_http_*).
std::string HttpMetricsText(const http::ServerStats& s);

}  // namespace pinfer::server
