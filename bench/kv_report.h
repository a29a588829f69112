// bench-kv results as a Markdown table and as JSON with stable keys:
//   {"workload": {...}, "paged": {...}, "contiguous": {...}}
// where each layout has kv_utilization_mean, kv_utilization_min, kv_utilization_mean_all,
// saturated_steps, max_running, mean_running, requests_per_s, output_tokens_per_s,
// preemptions, queue_wait_mean_s, queue_wait_max_s, queue_wait_mean_steps,
// queue_wait_max_steps, steps, elapsed_s, finished, output_tokens, prefill_tokens,
// forwarded_tokens, us_per_forwarded_token, bytes_reserved, pool_slots,
// max_concurrency_at_max_model_len.
#pragma once

#include <string>

#include "bench/kv_compare.h"

namespace pinfer {

std::string KvBenchMarkdown(const KvBenchResult& r);
std::string KvBenchJson(const KvBenchResult& r);  // pretty-printed, ends with a newline

}  // namespace pinfer
