#include "bench/kv_compare.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"

namespace pinfer {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The workload's requests, greedy and ignoring EOS (every one runs to its output length).
absl::Status SubmitWorkload(const Model& model, Engine& e,
                            const std::vector<WorkloadRequest>& requests, uint64_t seed) {
  const int n_vocab = model.config().n_vocab;
  for (size_t i = 0; i < requests.size(); ++i) {
    GenerationRequest req;
    req.prompt = WorkloadPrompt(seed, static_cast<int>(i), requests[i].prompt_len, n_vocab);
    req.params.temperature = 0.0f;
    req.params.max_tokens = requests[i].output_len;
    req.params.ignore_eos = true;
    auto id = e.AddRequest(std::move(req));
    if (!id.ok()) return id.status();
  }
  return absl::OkStatus();
}

// What the step loop saw, beside the per-step samples in LayoutResult.
struct StepLog {
  std::vector<double> step_start;       // seconds, at the start of each step
  std::map<int64_t, int64_t> admitted;  // request id -> admission step
  double util_sum = 0, sat_sum = 0, running_sum = 0;
};

// Steps the engine until it has no work, sampling occupancy after each step into r and log.
absl::Status RunSteps(Engine& e, Clock::time_point t0, LayoutResult& r, StepLog& log) {
  r.kv_utilization_min = 1.0;
  while (e.HasWork()) {
    log.step_start.push_back(Seconds(t0, Clock::now()));
    auto outs = e.Step();
    if (!outs.ok()) return outs.status();
    const double t = Seconds(t0, Clock::now());
    for (const SequenceOutput& o : *outs) {
      if (o.admitted_step >= 0) log.admitted.emplace(o.request_id, o.admitted_step);
      if (o.finished) {
        ++r.finished;
        r.output_tokens += o.output_tokens;
      }
    }
    const EngineStats st = e.stats();
    StepSample s;
    s.t_s = t;
    s.running = st.running;
    s.waiting = st.waiting;
    s.utilization = e.KvReport().utilization();
    s.saturated = st.kv_blocked;
    log.util_sum += s.utilization;
    log.running_sum += s.running;
    if (s.saturated) {
      ++r.saturated_steps;
      log.sat_sum += s.utilization;
      r.kv_utilization_min = std::min(r.kv_utilization_min, s.utilization);
    }
    r.samples.push_back(s);
    if (log.step_start.size() > 50'000'000) return absl::InternalError("bench-kv: too many steps");
  }
  return absl::OkStatus();
}

// Utilization (over the steps the pool held work back, or every step when it never did),
// queue waits and rates.
void Summarize(const StepLog& log, LayoutResult& r) {
  const double n_steps = std::max<double>(1.0, static_cast<double>(r.samples.size()));
  r.kv_utilization_mean_all = log.util_sum / n_steps;
  r.mean_running = log.running_sum / n_steps;
  if (r.saturated_steps > 0) {
    r.kv_utilization_mean = log.sat_sum / static_cast<double>(r.saturated_steps);
  } else {  // the pool never held anyone back: report over every step
    r.kv_utilization_mean = r.kv_utilization_mean_all;
    r.kv_utilization_min = 1.0;
    for (const StepSample& s : r.samples) {
      r.kv_utilization_min = std::min(r.kv_utilization_min, s.utilization);
    }
  }
  double wait_s = 0, wait_steps = 0;
  for (const auto& [id, step] : log.admitted) {
    const double ws = log.step_start[static_cast<size_t>(step)];
    wait_s += ws;
    wait_steps += static_cast<double>(step);
    r.queue_wait_max_s = std::max(r.queue_wait_max_s, ws);
    r.queue_wait_max_steps = std::max(r.queue_wait_max_steps, step);
  }
  if (!log.admitted.empty()) {
    r.queue_wait_mean_s = wait_s / static_cast<double>(log.admitted.size());
    r.queue_wait_mean_steps = wait_steps / static_cast<double>(log.admitted.size());
  }
  if (r.elapsed_s > 0) {
    r.requests_per_s = static_cast<double>(r.finished) / r.elapsed_s;
    r.output_tokens_per_s = static_cast<double>(r.output_tokens) / r.elapsed_s;
  }
}

}  // namespace

absl::StatusOr<LayoutResult> RunKvWorkload(const Model& model, EngineConfig config,
                                           const std::vector<WorkloadRequest>& requests,
                                           uint64_t seed, const BackendFactory& make_backend) {
  std::unique_ptr<Backend> backend;
  if (make_backend) {
    auto b = make_backend(config);
    if (!b.ok()) return b.status();
    backend = std::move(*b);
  }
  auto engine = Engine::Create(model, config, std::move(backend), /*quiet=*/true);
  if (!engine.ok()) return engine.status();
  Engine& e = **engine;
  LayoutResult r;
  r.layout = std::string(KvLayoutName(config.kv_layout));
  r.max_concurrency_at_max_model_len = static_cast<int>(e.ledger().max_concurrency);
  if (absl::Status s = SubmitWorkload(model, e, requests, seed); !s.ok()) return s;
  const OccupancyReport first = e.KvReport();
  r.bytes_reserved = first.bytes_reserved;
  r.pool_slots = first.blocks_total * first.block_size;
  StepLog log;
  const Clock::time_point t0 = Clock::now();
  if (absl::Status s = RunSteps(e, t0, r, log); !s.ok()) return s;
  const EngineStats st = e.stats();
  r.steps = st.steps;
  r.elapsed_s = Seconds(t0, Clock::now());
  r.max_running = st.max_running;
  r.prefill_tokens = st.prefill_tokens;
  r.forwarded_tokens = st.forwarded_tokens;
  if (r.forwarded_tokens > 0) {
    r.us_per_forwarded_token = 1e6 * r.elapsed_s / static_cast<double>(r.forwarded_tokens);
  }
  r.preemptions = st.preemptions;
  if (r.finished != static_cast<int64_t>(requests.size())) {
    return absl::InternalError(
        absl::StrCat("bench-kv: ", r.finished, " of ", requests.size(), " requests finished"));
  }
  Summarize(log, r);
  return r;
}

absl::StatusOr<KvBenchResult> CompareKvLayouts(const Model& model, EngineConfig config,
                                               const WorkloadSpec& spec,
                                               const BackendFactory& make_backend) {
  const ModelConfig& mc = model.config();
  if (config.max_model_len <= 0) config.max_model_len = std::min(mc.context_length, 4096);
  auto requests = MakeWorkload(spec, config.max_model_len);
  if (!requests.ok()) return requests.status();
  auto row = KvRowBytes(config.kv_dtype, mc.kv_dim());
  if (!row.ok()) return row.status();
  KvBenchResult res;
  res.spec = spec;
  res.kv_bytes_per_token = 2ull * static_cast<uint64_t>(mc.n_layers) * *row;
  const uint64_t per_seq = res.kv_bytes_per_token * static_cast<uint64_t>(config.max_model_len);
  const uint64_t seats = config.kv_cache_memory / per_seq;
  if (seats == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv-cache-memory ", config.kv_cache_memory, " bytes cannot hold one max_model_len (",
        config.max_model_len, ") sequence of ", per_seq, " bytes"));
  }
  config.kv_cache_memory = seats * per_seq;
  res.kv_cache_memory = config.kv_cache_memory;
  res.requests = spec.requests;
  for (const WorkloadRequest& r : *requests) {
    res.prompt_tokens += r.prompt_len;
    res.output_tokens += r.output_len;
  }
  res.max_model_len = config.max_model_len;
  res.block_size = config.block_size;
  res.max_num_seqs = config.max_num_seqs;
  res.max_num_batched_tokens = config.max_num_batched_tokens;
  res.kv_dtype = std::string(KvDtypeName(config.kv_dtype));
  for (KvLayout layout : {KvLayout::kPaged, KvLayout::kContiguous}) {
    config.kv_layout = layout;
    auto r = RunKvWorkload(model, config, *requests, spec.seed, make_backend);
    if (!r.ok()) return r.status();
    (layout == KvLayout::kPaged ? res.paged : res.contiguous) = std::move(*r);
  }
  return res;
}

}  // namespace pinfer
