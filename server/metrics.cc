#include "server/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pinfer::server {
namespace {

// A label value as the text format writes it: backslash, quote and newline escaped.
std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string Number(double v) { return absl::StrFormat("%.10g", v); }

// An unlabelled pagedinfer_ sample with its HELP and TYPE (the HTTP layer's figures).
void Metric(std::string* out, const char* name, const char* type, const char* help, double value) {
  absl::StrAppend(out, "# HELP pagedinfer_", name, " ", help, "\n# TYPE pagedinfer_", name, " ",
                  type, "\n", "pagedinfer_", name, " ", Number(value), "\n");
}

class Writer {
 public:
  explicit Writer(const std::string& model)
      : model_label_("model_name=\"" + Escape(model) + "\"") {}

  void Family(const std::string& name, const char* type, const char* help) {
    absl::StrAppend(&out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  // One sample; `labels` ("" or `k="v"` pairs) go after the model_name label.
  void Sample(const std::string& name, double v, const std::string& labels = "") {
    absl::StrAppend(&out_, name, "{", model_label_, labels.empty() ? "" : ",", labels, "} ",
                    Number(v), "\n");
  }
  void Scalar(const std::string& name, const char* type, const char* help, double v) {
    Family(name, type, help);
    Sample(name, v);
  }
  void Hist(const std::string& name, const char* help, const Histogram& h) {
    Family(name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds().size(); ++i) {
      cumulative += h.counts()[i];
      Sample(name + "_bucket", (double)cumulative, "le=\"" + Number(h.bounds()[i]) + "\"");
    }
    Sample(name + "_bucket", (double)h.count(), "le=\"+Inf\"");
    Sample(name + "_sum", h.sum());
    Sample(name + "_count", (double)h.count());
  }
  std::string Take() { return std::move(out_); }

 private:
  const std::string model_label_;
  std::string out_;
};

void VllmMetrics(const WorkerSnapshot& s, Writer& w) {
  const EngineStats& st = s.stats;
  const ServingMetrics& m = s.serving;
  w.Scalar("vllm:num_requests_running", "gauge", "Requests with a sequence in the running batch.",
           st.running_requests);
  w.Scalar("vllm:num_requests_waiting", "gauge", "Requests waiting to be (re)admitted.",
           st.waiting_requests);
  w.Scalar("vllm:kv_cache_usage_perc", "gauge",
           "KV-cache usage: used blocks over all blocks (1 = 100 percent).",
           s.kv.blocks_total ? (double)s.kv.blocks_used / (double)s.kv.blocks_total : 0.0);
  w.Scalar("vllm:prompt_tokens_total", "counter", "Prompt tokens of accepted requests.",
           (double)s.counters.prompt_tokens);
  w.Scalar("vllm:generation_tokens_total", "counter", "Tokens generated.",
           (double)st.generated_tokens);
  w.Scalar("vllm:num_preemptions_total", "counter",
           "Sequences preempted (blocks freed, recomputed later).", (double)st.preemptions);
  w.Scalar("vllm:prefix_cache_hits_total", "counter",
           "Prompt tokens served from the prefix cache (requests' first tokens so far).",
           (double)m.cached_prompt_tokens);
  w.Family("vllm:request_success_total", "counter", "Requests finished, by finish reason.");
  for (const char* reason : {"stop", "length", "abort"}) {
    auto it = m.finished_by_reason.find(reason);
    w.Sample("vllm:request_success_total", it == m.finished_by_reason.end() ? 0 : it->second,
             absl::StrCat("finished_reason=\"", reason, "\""));
  }
  w.Hist("vllm:time_to_first_token_seconds", "Seconds from arrival to the first token.",
         m.time_to_first_token);
  w.Hist("vllm:inter_token_latency_seconds", "Seconds between a completion's tokens.",
         m.inter_token_latency);
  w.Hist("vllm:e2e_request_latency_seconds", "Seconds from arrival to the last token.",
         m.e2e_request_latency);
  w.Hist("vllm:request_queue_time_seconds", "Seconds from arrival to the first scheduled step.",
         m.request_queue_time);
}

// The project's own figures, unlabelled as they always were (pagedinfer_*).
void OwnMetrics(const WorkerSnapshot& s, const MemoryLedger& ledger, std::string* o) {
  const OccupancyReport& kv = s.kv;
  const EngineStats& st = s.stats;
  const WorkerCounters& c = s.counters;
  Metric(o, "kv_blocks_capacity", "gauge", "KV blocks in the pool", (double)kv.blocks_total);
  Metric(o, "kv_blocks_used", "gauge", "KV blocks referenced by a sequence's block table",
         (double)kv.blocks_used);
  Metric(o, "kv_blocks_free", "gauge", "KV blocks on the free list", (double)kv.blocks_free);
  Metric(o, "kv_blocks_cached", "gauge", "idle prefix-cache blocks (reusable, evictable)",
         (double)kv.blocks_cached);
  Metric(o, "kv_usage_ratio", "gauge", "used KV blocks over all blocks",
         kv.blocks_total ? (double)kv.blocks_used / (double)kv.blocks_total : 0.0);
  Metric(o, "kv_tokens_stored", "gauge", "distinct tokens stored in the KV pool",
         (double)kv.tokens_stored);
  Metric(o, "kv_bytes_reserved", "gauge", "bytes reserved for the KV pool",
         (double)kv.bytes_reserved);
  absl::StrAppend(o, "# HELP pagedinfer_ledger_bytes the memory ledger's lines, bytes set aside\n",
                  "# TYPE pagedinfer_ledger_bytes gauge\n");
  const std::pair<const char*, uint64_t> lines[] = {{"weights", ledger.weights_bytes},
                                                    {"kv cache", ledger.kv_pool_bytes},
                                                    {"workspace", ledger.workspace_bytes},
                                                    {"runtime reserve", ledger.reserve_bytes},
                                                    {"cuda graphs", ledger.graph_bytes}};
  for (const auto& [line, bytes] : lines) {
    absl::StrAppend(o, "pagedinfer_ledger_bytes{line=\"", line, "\"} ", Number((double)bytes), "\n");
  }
  Metric(o, "requests_running", "gauge", "sequences being generated", st.running);
  Metric(o, "requests_waiting", "gauge", "sequences waiting for admission", st.waiting);
  Metric(o, "preemptions_total", "counter", "sequences preempted (blocks freed, recomputed)",
         (double)st.preemptions);
  Metric(o, "requests_accepted_total", "counter", "requests the engine accepted",
         (double)c.requests_accepted);
  Metric(o, "requests_rejected_total", "counter", "requests refused (invalid or queue full)",
         (double)c.requests_rejected);
  Metric(o, "requests_cancelled_total", "counter", "requests cancelled by their client",
         (double)c.requests_cancelled);
  int64_t finished = 0;
  for (const auto& [reason, n] : s.serving.finished_by_reason) finished += n;
  Metric(o, "requests_finished_total", "counter", "requests finished (any reason)",
         (double)finished);
  Metric(o, "prompt_tokens_total", "counter", "prompt tokens of accepted requests",
         (double)c.prompt_tokens);
  Metric(o, "prefill_tokens_total", "counter",
         "tokens computed in prompt chunks (prefix-cache hits excluded, recomputes included)",
         (double)st.prefill_tokens);
  Metric(o, "generation_tokens_total", "counter", "tokens generated", (double)st.generated_tokens);
  Metric(o, "prefill_tokens_per_second", "gauge", "prompt tokens computed per second (~10 s)",
         c.prefill_rate);
  Metric(o, "generation_tokens_per_second", "gauge", "tokens generated per second (~10 s)",
         c.generation_rate);
  Metric(o, "steps_total", "counter", "engine steps", (double)st.steps);
}

}  // namespace

std::string PrometheusText(const WorkerSnapshot& snapshot, const MemoryLedger& ledger,
                           const std::string& model_name) {
  Writer w(model_name);
  VllmMetrics(snapshot, w);
  std::string out = w.Take();
  OwnMetrics(snapshot, ledger, &out);
  return out;
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
