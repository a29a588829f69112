#include "bench/speed.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/workload.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/thread_pool.h"
#include "loaders/absl_compat.h"
#include "loaders/kernel_set.h"

namespace pinfer {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t Elements(const WeightMatrix& w) { return static_cast<uint64_t>(w.rows * w.cols); }

// Runs one request alone to completion; returns the seconds its steps took. `cached` (unless
// -1): the prompt tokens the prefix cache must serve (the depth), checked, so that a depth
// that was evicted or not matched is an error rather than a wrong figure.
absl::StatusOr<double> TimeRequest(Engine& e, std::vector<int32_t> prompt, int max_tokens,
                                   int cached = 0) {
  GenerationRequest req;
  req.prompt = std::move(prompt);
  req.params.temperature = 0.0f;
  req.params.max_tokens = max_tokens;
  req.params.ignore_eos = true;
  auto id = e.AddRequest(std::move(req));
  if (!id.ok()) return id.status();
  const Clock::time_point t0 = Clock::now();
  int served = 0;
  while (e.HasWork()) {
    auto outs = e.Step();
    if (!outs.ok()) return outs.status();
    for (const SequenceOutput& o : *outs) served = o.cached_prompt_tokens;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (cached >= 0 && served != cached) {
    return absl::InternalError(absl::StrCat("the prefix cache served ", served,
                                            " prompt tokens instead of the depth's ", cached));
  }
  return seconds;
}

void MeanStddev(SpeedTest* t) {
  double sum = 0;
  for (double v : t->samples_ts) sum += v;
  const double n = static_cast<double>(t->samples_ts.size());
  t->mean_ts = sum / n;
  double sq = 0;
  for (double v : t->samples_ts) sq += (v - t->mean_ts) * (v - t->mean_ts);
  t->stddev_ts = n > 1 ? std::sqrt(sq / (n - 1)) : 0.0;  // sample stddev, as llama-bench
}

std::string ParamsLabel(uint64_t n) {
  if (n >= 1'000'000'000) return absl::StrFormat("%.0fB", n / 1e9);
  if (n >= 1'000'000) return absl::StrFormat("%.0fM", n / 1e6);
  return absl::StrFormat("%.0fK", n / 1e3);
}

}  // namespace

ModelSummary SummarizeModel(const Model& model, KvDtype kv_dtype) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  ModelSummary s;
  s.size_bytes = w.total_bytes();
  const bool tied = w.output.data == w.tok_embd.data;
  uint64_t params = Elements(w.tok_embd) + w.output_norm.size();
  uint64_t matrix_bytes = 0;
  std::map<GgmlType, uint64_t> by_type;
  for (const LayerWeights& l : w.layers) {
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      params += Elements(*m);
      matrix_bytes += m->bytes();
      by_type[m->type] += m->bytes();
    }
    params += l.attn_norm.size() + l.ffn_norm.size() + l.bq.size() + l.bk.size() + l.bv.size();
  }
  if (!tied) params += Elements(w.output);
  s.n_params = params;
  // Decode reads every layer matrix and the output projection once per token, but only one
  // row of the embedding table (all of it when the output projection is the same tensor).
  s.decode_weight_bytes = matrix_bytes + w.output.bytes() + (tied ? 0 : w.tok_embd.row_bytes);
  GgmlType main = GgmlType::kF32;
  uint64_t most = 0;
  for (const auto& [type, bytes] : by_type) {
    if (bytes > most) most = bytes, main = type;
  }
  s.label = absl::StrCat(c.arch, " ", ParamsLabel(params), " ", Sv(GgmlTypeInfoOf(main).name));
  auto row = KvRowBytes(kv_dtype, c.kv_dim());
  s.kv_bytes_per_token = row.ok() ? 2ull * static_cast<uint64_t>(c.n_layers) * *row : 0;
  return s;
}

double MeasureCopyBandwidth(int threads, size_t bytes, int reps) {
  std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);
  ThreadPool pool(threads);
  const int64_t chunk = 1 << 20;
  const int64_t n_chunks = static_cast<int64_t>((bytes + chunk - 1) / chunk);
  double best = 1e30;
  // Dynamic chunks, as before the pool had static splits: the reference bandwidth is what the
  // machine gives even when one thread is slowed by other load.
  for (int r = 0; r < reps + 1; ++r) {  // the first pass faults the pages in
    const Clock::time_point t0 = Clock::now();
    pool.ParallelForDynamic(n_chunks, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) {
        const size_t off = static_cast<size_t>(i * chunk);
        std::memcpy(dst.data() + off, src.data() + off, std::min<size_t>(chunk, bytes - off));
      }
    });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r > 0) best = std::min(best, s);
  }
  return 2.0 * static_cast<double>(bytes) / best / 1e9;
}

double MeasureReadBandwidth(int threads, size_t bytes, int reps) {
  const size_t n_words = std::max<size_t>(bytes / sizeof(uint64_t), 1);
  std::vector<uint64_t> buf(n_words);
  for (size_t i = 0; i < n_words; ++i) buf[i] = i;  // faults every page in, not zero pages
  ThreadPool pool(threads);
  // One running sum per thread, each on its own cache line.
  struct alignas(64) Partial {
    uint64_t sum = 0;
  };
  std::vector<Partial> partial(static_cast<size_t>(pool.size()));
  const size_t chunk = (1 << 20) / sizeof(uint64_t);  // 1 MiB per work item, as the memcpy
  const int64_t n_chunks = static_cast<int64_t>((n_words + chunk - 1) / chunk);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const Clock::time_point t0 = Clock::now();
    pool.ParallelForDynamic(n_chunks, [&](int64_t b, int64_t e, int thread) {
      const uint64_t* p = buf.data();
      // Four independent sums: the loop vectorizes and is bound by loads, not by adds.
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      const size_t hi = std::min(n_words, static_cast<size_t>(e) * chunk);
      size_t i = static_cast<size_t>(b) * chunk;
      for (; i + 4 <= hi; i += 4) s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
      for (; i < hi; ++i) s0 += p[i];
      partial[static_cast<size_t>(thread)].sum += s0 + s1 + s2 + s3;
    });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, s);
  }
  // The sums are checked, so the reads cannot be dropped: sum(0..n-1) per pass.
  uint64_t total = 0;
  for (const Partial& q : partial) total += q.sum;
  const uint64_t expect = static_cast<uint64_t>(n_words) * (n_words - 1) / 2;
  if (total != expect * static_cast<uint64_t>(reps)) return 0.0;
  return static_cast<double>(n_words * sizeof(uint64_t)) / best / 1e9;
}

namespace {

EngineConfig BenchEngineConfig(const SpeedOptions& o, const ModelSummary& m) {
  EngineConfig c = o.engine;
  c.max_num_seqs = 1;
  // Every repetition computes its own prompt; only a depth is served from the cache.
  c.prefix_caching = o.n_depth > 0;
  // Depth prefills (untimed) go in steps of up to 512 tokens.
  c.max_num_batched_tokens = std::max({o.n_prompt, o.n_depth > 0 ? 512 : 0, 1});
  c.max_model_len = (o.n_depth + std::max(o.n_prompt, o.n_gen) + 1 + 15) / 16 * 16;
  // With a depth, room for the cached depth beside the blocks of earlier repetitions.
  c.kv_cache_memory =
      m.kv_bytes_per_token * static_cast<uint64_t>(c.max_model_len) * (o.n_depth > 0 ? 2 : 1);
  return c;
}

// One test (pp when n_gen == 0, else tg) at the options' depth: the depth's tokens are
// computed once (and cached), then an untimed warm-up and the timed repetitions each add a
// prompt of their own after them.
absl::StatusOr<SpeedTest> RunTest(Engine& e, const SpeedOptions& o, int n_prompt, int n_gen,
                                  int n_vocab) {
  SpeedTest t;
  t.name = n_gen > 0 ? absl::StrCat("tg", n_gen) : absl::StrCat("pp", n_prompt);
  if (o.n_depth > 0) absl::StrAppend(&t.name, " @ d", o.n_depth);
  t.n_prompt = n_prompt, t.n_gen = n_gen, t.n_depth = o.n_depth;
  const std::vector<int32_t> depth = WorkloadPrompt(4321, 0, o.n_depth, n_vocab);
  if (o.n_depth > 0) {  // computes the depth, or finds it cached by an earlier test
    if (auto w = TimeRequest(e, depth, 1, /*cached=*/-1); !w.ok()) return w.status();
  }
  // tg: one prompt token, then n_gen - 1 decodes: n_gen forward passes of one token each.
  const int own = n_gen > 0 ? 1 : n_prompt, max_tokens = n_gen > 0 ? n_gen : 1;
  for (int r = -1; r < o.repetitions; ++r) {  // r == -1: the warm-up
    std::vector<int32_t> prompt = depth;
    for (int32_t id : WorkloadPrompt(1234, r + 1 + (n_gen > 0 ? 1000 : 0), own, n_vocab)) {
      prompt.push_back(id);
    }
    // The warm-up of tg decodes one token only.
    auto s = TimeRequest(e, std::move(prompt), r < 0 ? 1 : max_tokens, o.n_depth);
    if (!s.ok()) return s.status();
    if (r >= 0) t.samples_ts.push_back((n_gen > 0 ? n_gen : n_prompt) / *s);
  }
  MeanStddev(&t);
  return t;
}

}  // namespace

absl::StatusOr<SpeedResult> RunSpeedBench(const Model& model, const SpeedOptions& o) {
  if (o.n_prompt < 0 || o.n_gen < 0 || (o.n_prompt == 0 && o.n_gen == 0)) {
    return absl::InvalidArgumentError("need -p > 0 or -n > 0 (and neither negative)");
  }
  if (o.repetitions < 1) return absl::InvalidArgumentError("-r must be at least 1");
  if (o.n_depth < 0 || o.n_depth % 16 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("-d ", o.n_depth,
                     " is not a multiple of the KV block size 16: the depth is served "
                     "from the prefix cache in whole blocks (use 0, 512, 1024, 4096, ...)"));
  }
  SpeedResult res;
  res.model = SummarizeModel(model, o.engine.kv_dtype);
  res.kv_dtype = std::string(KvDtypeName(o.engine.kv_dtype));
  res.kv_layout = std::string(KvLayoutName(o.engine.kv_layout));
  const EngineConfig c = BenchEngineConfig(o, res.model);
  std::unique_ptr<Backend> backend;
  if (o.make_backend) {
    auto b = o.make_backend(c);
    if (!b.ok()) return b.status();
    backend = std::move(*b);
  }
  auto engine = Engine::Create(model, c, std::move(backend), /*quiet=*/true);
  if (!engine.ok()) return engine.status();
  if ((*engine)->backend().name() != "cpu") res.backend = "CUDA";  // llama-bench's column
  res.cpu_kernels = KernelSetName(ActiveKernelSet());
  if (const auto* cpu = dynamic_cast<const CpuBackend*>(&(*engine)->backend()); cpu != nullptr) {
    res.cpu_weights = cpu->RepackSummary();
  }
  res.threads = c.threads > 0 ? c.threads : static_cast<int>(std::thread::hardware_concurrency());
  for (const bool gen : {false, true}) {
    if ((gen ? o.n_gen : o.n_prompt) == 0) continue;
    auto t = RunTest(**engine, o, gen ? 0 : o.n_prompt, gen ? o.n_gen : 0, model.config().n_vocab);
    if (!t.ok()) return t.status();
    if (gen) {
      // Token i (0-based) attends over depth + i + 1 stored tokens.
      t->bytes_per_token =
          res.model.decode_weight_bytes +
          res.model.kv_bytes_per_token * static_cast<uint64_t>(2 * o.n_depth + o.n_gen + 1) / 2;
      t->achieved_gbps = static_cast<double>(t->bytes_per_token) * t->mean_ts / 1e9;
    }
    res.tests.push_back(std::move(*t));
  }
  res.copy_gbps = MeasureCopyBandwidth(res.threads);
  res.read_gbps = MeasureReadBandwidth(res.threads);
  return res;
}

}  // namespace pinfer
