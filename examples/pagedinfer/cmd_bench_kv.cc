// pagedinfer bench-kv: a seeded workload through the real scheduler and model, against one
// KV memory budget, with the paged cache and then the contiguous one; reports utilization,
// concurrency, throughput, preemptions and queue waits as a table or JSON, and plots the
// occupancy over steps as an SVG.
#include <cstdio>
#include <fstream>

#include "bench/kv_compare.h"
#include "bench/kv_plot.h"
#include "bench/kv_report.h"
#include "engine/model/model.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/engine_flags.h"
#include "examples/pagedinfer/synth_cache.h"

namespace pinfer::cli {
namespace {

struct BenchKvFlags {
  std::string model_path, dist = "uniform", kv_dtype = "f16", kv_memory, format = "md", plot,
                          json_out;
  WorkloadSpec spec;
  int64_t seed = 1;
  EngineConfig c;
  EngineFlags ef;

  BenchKvFlags() {
    spec.requests = 200;
    c.max_model_len = 4096;
    c.max_num_seqs = 256;
    c.max_num_batched_tokens = 1024;
    c.threads = 0;
    // Default cpu: on a GPU a decode step costs about the same for 1 or 50 sequences, which
    // is where the paged cache's fewer steps finish sooner; --device cuda shows that.
    ef.device = "cpu";
  }

  void Register(Args& a) {
    a.Add("-m,--model", &model_path, "model file (default: a synthetic 'tiny' model, cached)");
    a.Add("--requests", &spec.requests, "requests in the workload");
    a.Add("--dist", &dist, "length distribution: uniform, chat (long-tailed) or fixed");
    a.Add("--min", &spec.min_len, "shortest prompt / output (uniform; chat clips to it)");
    a.Add("--max", &spec.max_len, "longest prompt / output (uniform; chat clips to it)");
    a.Add("--prompt-len", &spec.prompt_len, "prompt tokens (fixed)");
    a.Add("--output-len", &spec.output_len, "output tokens (fixed)");
    a.Add("--seed", &seed, "seed of the lengths and prompt tokens");
    a.Add("-c,--max-model-len", &c.max_model_len,
          "longest sequence; contiguous reserves this much");
    a.Add("--kv-cache-memory", &kv_memory,
          "KV budget of each layout, e.g. 128MiB (default: 16 max_model_len sequences)");
    a.Add("--block-size", &c.block_size, "token slots per paged block");
    a.Add("--kv-dtype", &kv_dtype, "KV cache format: f32, f16, bf16, q8_0, q4_0, fp8");
    a.Add("--max-num-seqs", &c.max_num_seqs,
          "sequences running at once (set high: the pool "
          "should be what limits concurrency)");
    a.Add("--max-num-batched-tokens", &c.max_num_batched_tokens, "tokens per step");
    a.Add("-t,--threads", &c.threads, "CPU threads (0: all)");
    a.Add("--admission-headroom", &c.admission_headroom,
          "tokens of growth kept free per running sequence when admitting (paged; 0: none)");
    ef.RegisterDevice(a);
    a.Add("-o,--output", &format, "md or json");
    a.Add("--plot", &plot, "write an SVG of occupancy over steps to this file");
    a.Add("--json-out", &json_out, "also write the JSON to this file (whatever -o prints)");
  }
};

}  // namespace

int BenchKvMain(int argc, char** argv) {
  BenchKvFlags f;
  Args a("bench-kv",
         "pagedinfer bench-kv [-m MODEL] --requests N --dist uniform|chat|fixed "
         "--max-model-len L --kv-cache-memory BYTES [-o md|json] [--plot FILE.svg]",
         {"pagedinfer bench-kv --requests 200 --dist uniform --max-model-len 4096 "
          "--kv-cache-memory 128MiB --plot kv.svg",
          "pagedinfer bench-kv --dist chat --max 2048 --max-model-len 4096 -o json"});
  f.Register(a);
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  std::string &model_path = f.model_path, &dist = f.dist, &kv_dtype = f.kv_dtype,
              &kv_memory = f.kv_memory, &format = f.format, &plot = f.plot, &json_out = f.json_out;
  WorkloadSpec& spec = f.spec;
  EngineConfig& c = f.c;
  const EngineFlags& ef = f.ef;
  const int64_t seed = f.seed;
  if (format != "md" && format != "json") {
    return Fail(absl::InvalidArgumentError("-o must be md or json"), 2);
  }
  auto d = ParseLengthDist(dist);
  if (!d.ok()) return Fail(d.status(), 2);
  spec.dist = *d;
  spec.seed = static_cast<uint64_t>(seed);
  auto dtype = ParseKvDtype(kv_dtype);
  if (!dtype.ok()) return Fail(dtype.status(), 2);
  c.kv_dtype = *dtype;
  if (model_path.empty()) {
    auto p = CachedSynthModel("tiny", "Q4_0");
    if (!p.ok()) return Fail(p.status());
    model_path = *p;
  }
  auto model = Model::Load(model_path);
  if (!model.ok()) return Fail(model.status());
  if (kv_memory.empty()) {
    const ModelConfig& mc = (*model)->config();
    auto row = KvRowBytes(c.kv_dtype, mc.kv_dim());
    if (!row.ok()) return Fail(row.status(), 2);
    c.kv_cache_memory = 16ull * 2 * mc.n_layers * *row * static_cast<uint64_t>(c.max_model_len);
  } else {
    auto bytes = ParseBytes(kv_memory);
    if (!bytes.ok()) return Fail(bytes.status(), 2);
    c.kv_cache_memory = *bytes;
  }
  c.enforce_eager = ef.enforce_eager;
  std::string chosen;          // what runs the workload, named by the backend's creation
  absl::Status backend_error;  // a --device that cannot be used is a usage error (exit 2)
  const Model& m = **model;
  BackendFactory make = [&](const EngineConfig& config) {
    auto b = ef.MakeBackend(m, config, &chosen);
    if (!b.ok()) backend_error = b.status();
    return b;
  };
  auto res = CompareKvLayouts(m, c, spec, make);
  if (!backend_error.ok()) return Fail(backend_error, 2);
  if (!res.ok()) return Fail(res.status());
  res->model = model_path;
  res->device = chosen;
  auto write = [](const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    return f.good() ? absl::OkStatus() : absl::UnavailableError("cannot write " + path);
  };
  if (!plot.empty()) {
    if (absl::Status s = write(plot, KvBenchSvg(*res)); !s.ok()) return Fail(s);
  }
  if (!json_out.empty()) {
    if (absl::Status s = write(json_out, KvBenchJson(*res)); !s.ok()) return Fail(s);
  }
  const std::string out = format == "json" ? KvBenchJson(*res) : KvBenchMarkdown(*res);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace pinfer::cli
