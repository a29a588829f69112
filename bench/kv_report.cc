#include "bench/kv_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/memory/memory_ledger.h"
#include "loaders/absl_compat.h"
#include "nlohmann/json.hpp"

namespace pinfer {
namespace {

nlohmann::ordered_json LayoutJson(const LayoutResult& r) {
  nlohmann::ordered_json j;
  j["kv_utilization_mean"] = r.kv_utilization_mean;
  j["kv_utilization_min"] = r.kv_utilization_min;
  j["kv_utilization_mean_all"] = r.kv_utilization_mean_all;
  j["saturated_steps"] = r.saturated_steps;
  j["max_running"] = r.max_running;
  j["mean_running"] = r.mean_running;
  j["requests_per_s"] = r.requests_per_s;
  j["output_tokens_per_s"] = r.output_tokens_per_s;
  j["preemptions"] = r.preemptions;
  j["queue_wait_mean_s"] = r.queue_wait_mean_s;
  j["queue_wait_max_s"] = r.queue_wait_max_s;
  j["queue_wait_mean_steps"] = r.queue_wait_mean_steps;
  j["queue_wait_max_steps"] = r.queue_wait_max_steps;
  j["steps"] = r.steps;
  j["elapsed_s"] = r.elapsed_s;
  j["finished"] = r.finished;
  j["output_tokens"] = r.output_tokens;
  j["prefill_tokens"] = r.prefill_tokens;
  j["forwarded_tokens"] = r.forwarded_tokens;
  j["us_per_forwarded_token"] = r.us_per_forwarded_token;
  j["bytes_reserved"] = r.bytes_reserved;
  j["pool_slots"] = r.pool_slots;
  j["max_concurrency_at_max_model_len"] = r.max_concurrency_at_max_model_len;
  return j;
}

std::string Pct(double v) { return absl::StrFormat("%.1f%%", 100.0 * v); }

}  // namespace

std::string KvBenchJson(const KvBenchResult& r) {
  nlohmann::ordered_json w;
  w["model"] = r.model;
  w["device"] = r.device;
  w["dist"] = std::string(LengthDistName(r.spec.dist));
  w["requests"] = r.requests;
  w["min_len"] = r.spec.min_len;
  w["max_len"] = r.spec.max_len;
  if (r.spec.dist == LengthDist::kFixed) {
    w["prompt_len"] = r.spec.prompt_len;
    w["output_len"] = r.spec.output_len;
  }
  w["seed"] = r.spec.seed;
  w["prompt_tokens"] = r.prompt_tokens;
  w["output_tokens"] = r.output_tokens;
  w["max_model_len"] = r.max_model_len;
  w["block_size"] = r.block_size;
  w["max_num_seqs"] = r.max_num_seqs;
  w["max_num_batched_tokens"] = r.max_num_batched_tokens;
  w["kv_dtype"] = r.kv_dtype;
  w["kv_cache_memory"] = r.kv_cache_memory;
  w["kv_bytes_per_token"] = r.kv_bytes_per_token;
  nlohmann::ordered_json j;
  j["workload"] = w;
  j["paged"] = LayoutJson(r.paged);
  j["contiguous"] = LayoutJson(r.contiguous);
  return j.dump(2) + "\n";
}

std::string KvBenchMarkdown(const KvBenchResult& r) {
  std::string out = absl::StrFormat(
      "workload: %s\nmodel: %s on %s; KV %s, %s per token; max_model_len %d, block size %d, "
      "max_num_seqs %d, max_num_batched_tokens %d\nKV budget for each layout: %s (%d "
      "max_model_len sequences)\n\n",
      DescribeWorkload(r.spec), r.model, r.device, r.kv_dtype, FormatBytes(r.kv_bytes_per_token),
      r.max_model_len, r.block_size, r.max_num_seqs, r.max_num_batched_tokens,
      FormatBytes(r.kv_cache_memory),
      r.kv_cache_memory / (r.kv_bytes_per_token * static_cast<uint64_t>(r.max_model_len)));
  const LayoutResult* rs[] = {&r.paged, &r.contiguous};
  auto row = [&](const std::string& name, auto fn) {
    absl::StrAppend(&out, "| ", name, " | ", fn(*rs[0]), " | ", fn(*rs[1]), " |\n");
  };
  absl::StrAppend(&out, "| | paged | contiguous |\n|---|---:|---:|\n");
  row("KV utilization, mean over saturated steps",
      [](const LayoutResult& l) { return Pct(l.kv_utilization_mean); });
  row("KV utilization, worst saturated step",
      [](const LayoutResult& l) { return Pct(l.kv_utilization_min); });
  row("KV utilization, mean over all steps",
      [](const LayoutResult& l) { return Pct(l.kv_utilization_mean_all); });
  row("saturated steps / steps",
      [](const LayoutResult& l) { return absl::StrCat(l.saturated_steps, " / ", l.steps); });
  row("sequences running at once: max (mean)", [](const LayoutResult& l) {
    return absl::StrFormat("%d (%.1f)", l.max_running, l.mean_running);
  });
  row("requests finished", [](const LayoutResult& l) { return absl::StrCat(l.finished); });
  row("elapsed", [](const LayoutResult& l) { return absl::StrFormat("%.2f s", l.elapsed_s); });
  row("requests/s",
      [](const LayoutResult& l) { return absl::StrFormat("%.2f", l.requests_per_s); });
  row("output tokens/s",
      [](const LayoutResult& l) { return absl::StrFormat("%.1f", l.output_tokens_per_s); });
  row("preemptions", [](const LayoutResult& l) { return absl::StrCat(l.preemptions); });
  row("prompt tokens computed (recompute included)",
      [](const LayoutResult& l) { return absl::StrCat(l.prefill_tokens); });
  row("tokens through the model (time per token)", [](const LayoutResult& l) {
    return absl::StrFormat("%d (%.0f us)", l.forwarded_tokens, l.us_per_forwarded_token);
  });
  row("queue wait: mean / max (steps)", [](const LayoutResult& l) {
    return absl::StrFormat("%.0f / %d", l.queue_wait_mean_steps, l.queue_wait_max_steps);
  });
  row("queue wait: mean / max (s)", [](const LayoutResult& l) {
    return absl::StrFormat("%.2f / %.2f", l.queue_wait_mean_s, l.queue_wait_max_s);
  });
  absl::StrAppend(
      &out,
      "\nutilization = bytes holding stored tokens / bytes reserved (KvReport), sampled after "
      "every step; a step is saturated when the scheduler left the head of the queue waiting "
      "for KV blocks (not for a seat under max_num_seqs or for the step's token budget): the "
      "KV pool holds the queue back.\n");
  return out;
}

}  // namespace pinfer
