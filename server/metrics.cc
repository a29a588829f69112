#include "server/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pinfer::server {
namespace {

void Metric(std::string* out, const char* name, const char* type, const char* help, double value) {
  absl::StrAppend(out, "# HELP pagedinfer_", name, " ", help, "\n# TYPE pagedinfer_", name, " ",
                  type, "\n", "pagedinfer_", name, " ", absl::StrFormat("%.10g", value), "\n");
}

}  // namespace

std::string PrometheusText(const EngineStats& st, const OccupancyReport& kv,
                           const WorkerCounters& c) {
  std::string o;
  Metric(&o, "kv_blocks_total", "gauge", "KV blocks in the pool", (double)kv.blocks_total);
  Metric(&o, "kv_blocks_used", "gauge", "KV blocks referenced by a sequence's block table",
         (double)kv.blocks_used);
  Metric(&o, "kv_blocks_free", "gauge", "KV blocks on the free list", (double)kv.blocks_free);
  Metric(&o, "kv_blocks_cached", "gauge", "idle prefix-cache blocks (reusable, evictable)",
         (double)kv.blocks_cached);
  Metric(&o, "kv_usage_ratio", "gauge", "used KV blocks over all blocks",
         kv.blocks_total ? (double)kv.blocks_used / (double)kv.blocks_total : 0.0);
  Metric(&o, "kv_tokens_stored", "gauge", "distinct tokens stored in the KV pool",
         (double)kv.tokens_stored);
  Metric(&o, "kv_bytes_reserved", "gauge", "bytes reserved for the KV pool",
         (double)kv.bytes_reserved);
  Metric(&o, "requests_running", "gauge", "sequences being generated", st.running);
  Metric(&o, "requests_waiting", "gauge", "sequences waiting for admission", st.waiting);
  Metric(&o, "preemptions_total", "counter", "sequences preempted (blocks freed, recomputed)",
         (double)st.preemptions);
  Metric(&o, "requests_accepted_total", "counter", "requests the engine accepted",
         (double)c.requests_accepted);
  Metric(&o, "requests_rejected_total", "counter", "requests refused (invalid or queue full)",
         (double)c.requests_rejected);
  Metric(&o, "requests_cancelled_total", "counter", "requests cancelled by their client",
         (double)c.requests_cancelled);
  Metric(&o, "requests_finished_total", "counter", "sequences finished", (double)st.finished);
  Metric(&o, "prompt_tokens_total", "counter", "prompt tokens of accepted requests",
         (double)c.prompt_tokens);
  Metric(&o, "prefill_tokens_total", "counter",
         "tokens computed in prompt chunks (prefix-cache hits excluded, recomputes included)",
         (double)st.prefill_tokens);
  Metric(&o, "generation_tokens_total", "counter", "tokens generated", (double)st.generated_tokens);
  Metric(&o, "prefill_tokens_per_second", "gauge", "prompt tokens computed per second (~10 s)",
         c.prefill_rate);
  Metric(&o, "generation_tokens_per_second", "gauge", "tokens generated per second (~10 s)",
         c.generation_rate);
  Metric(&o, "steps_total", "counter", "engine steps", (double)st.steps);
  return o;
}

std::string HttpMetricsText(const http::ServerStats& s) {
  std::string o;
  Metric(&o, "http_connections_open", "gauge", "client connections open",
         (double)s.connections_open);
  Metric(&o, "http_connections_accepted_total", "counter", "client connections accepted",
         (double)s.connections_accepted);
  Metric(&o, "http_connections_refused_total", "counter",
         "connections refused at a cap (--max-connections, --max-connections-per-client)",
         (double)s.connections_refused);
  Metric(&o, "http_requests_total", "counter", "requests handed to a handler", (double)s.requests);
  Metric(&o, "http_requests_refused_total", "counter",
         "requests refused by the HTTP layer (limits, malformed, shutting down)",
         (double)s.requests_refused);
  Metric(&o, "http_timeouts_total", "counter",
         "connections closed at a request or write deadline (slow clients)", (double)s.timeouts);
  Metric(&o, "http_client_disconnects_total", "counter",
         "clients that hung up while their request was being handled",
         (double)s.client_disconnects);
  Metric(&o, "http_requests_in_flight", "gauge", "requests whose answer is not yet written",
         (double)s.in_flight);
  return o;
}

}  // namespace pinfer::server
