// pagedinfer bench: prefill (ppN) and decode (tgN) tokens per second of one sequence, in
// llama-bench's table shape, with decode's achieved memory bandwidth against memcpy's.
#include <cstdio>

#include "bench/speed.h"
#include "engine/model/model.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/engine_flags.h"

namespace pinfer::cli {
int BenchMain(int argc, char** argv) {
  std::string model_path, kv_dtype = "f16", kv_layout = "paged", format = "md";
  SpeedOptions o;
  Args a("bench",
         "pagedinfer bench -m MODEL [-p 512] [-n 128] [-d 0] [-r 5] [--threads T] [--kv-dtype D] "
         "[--kv-layout L] [-o md|json]",
         {"pagedinfer bench -m llama-2-7b.Q4_0.gguf -t 8",
          "pagedinfer bench -m model.gguf -p 64 -n 16 -r 3 -o json",
          "pagedinfer bench -m model.gguf -p 0 -n 32 -d 1024"});
  a.Add("-m,--model", &model_path, "model file (GGUF)");
  a.Add("-p,--n-prompt", &o.n_prompt, "prompt tokens of the pp test (0: skip it)");
  a.Add("-n,--n-gen", &o.n_gen, "tokens generated in the tg test (0: skip it)");
  a.Add("-d,--n-depth", &o.n_depth,
        "context depth: tokens already in the cache before each test (a multiple of 16)");
  a.Add("-r,--repetitions", &o.repetitions, "timed repetitions of each test");
  a.Add("-t,--threads", &o.engine.threads, "CPU threads (0: all)");
  a.Add("--kv-dtype", &kv_dtype, "KV cache format: f32, f16, bf16, q8_0, q4_0, fp8");
  a.Add("--kv-layout", &kv_layout, "KV cache layout: paged or contiguous");
  a.Add("-o,--output", &format, "md or json");
  EngineFlags ef;
  ef.RegisterDevice(a);
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  if (model_path.empty()) return Fail(absl::InvalidArgumentError("-m MODEL is required"), 2);
  if (format != "md" && format != "json") {
    return Fail(absl::InvalidArgumentError("-o must be md or json"), 2);
  }
  auto dtype = ParseKvDtype(kv_dtype);
  if (!dtype.ok()) return Fail(dtype.status(), 2);
  auto layout = ParseKvLayout(kv_layout);
  if (!layout.ok()) return Fail(layout.status(), 2);
  o.engine.kv_dtype = *dtype;
  o.engine.kv_layout = *layout;
  o.engine.enforce_eager = ef.enforce_eager;
  o.engine.repack = !ef.no_repack;
  auto model = Model::Load(model_path);
  if (!model.ok()) return Fail(model.status());
  std::string device;
  o.make_backend = [&](const EngineConfig& c) { return ef.MakeBackend(**model, c, &device); };
  auto res = RunSpeedBench(**model, o);
  if (!res.ok()) return Fail(res.status());
  std::fprintf(stderr, "device: %s\n", device.c_str());
  const std::string out = format == "json" ? SpeedJson(*res) : SpeedMarkdown(*res);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace pinfer::cli
