// The Prometheus text exposition (format 0.0.4) of /metrics: vLLM's metric names
// (vllm:num_requests_running, vllm:time_to_first_token_seconds, ...) with a model_name label,
// so vLLM dashboards read them, beside the project's own KV-block and memory-ledger figures
// (pagedinfer_*) and the HTTP layer's (pagedinfer_http_*).
#pragma once

#include <string>

#include "engine/memory/memory_ledger.h"
#include "server/engine_worker.h"
#include "server/http/http_server.h"

namespace pinfer::server {

std::string PrometheusText(const WorkerSnapshot& snapshot, const MemoryLedger& ledger,
                           const std::string& model_name);
// The HTTP layer's connection and request figures (pagedinfer_http_*).
std::string HttpMetricsText(const http::ServerStats& s);

}  // namespace pinfer::server
