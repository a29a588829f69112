// The Prometheus text exposition of the engine's KV occupancy, queue and token counters.
#pragma once

#include <string>

#include "engine/engine.h"
#include "server/engine_worker.h"

namespace pinfer::server {

std::string PrometheusText(const EngineStats& stats, const OccupancyReport& kv,
                           const WorkerCounters& counters);

}  // namespace pinfer::server
