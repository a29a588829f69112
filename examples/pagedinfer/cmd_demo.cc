// pagedinfer demo: the main job on a built-in default. Makes (or reuses) a small synthetic
// model, prints its memory ledger, runs several requests that share one paged KV pool, and
// prints the occupancy report at its fullest and at the end.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "engine/build_info.h"
#include "engine/engine.h"
#include "engine/model/model.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/engine_flags.h"
#include "examples/pagedinfer/synth_cache.h"

namespace pinfer::cli {
namespace {

// Four requests (the first forked into two completions that share its prompt's blocks) run
// to the end in one pool; prints each completion, the engine's figures and the pool's
// occupancy at its fullest and at the end.
absl::Status RunDemoRequests(const Model& m, Engine& e, int n_tokens) {
  const std::vector<std::string> prompts = {
      "Once upon a time", "The little dog ran to the park and",
      "In a small town by the sea, there lived an old fisherman who", "Tom and Lily"};
  std::map<int64_t, std::string> label;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationRequest req;
    req.prompt = m.tokenizer().Encode(prompts[i], true);
    req.params.temperature = 0.8f;
    req.params.seed = 42 + i;
    req.params.max_tokens = n_tokens;
    req.n = i == 0 ? 2 : 1;  // the first request forks two completions sharing its prompt
    auto id = e.AddRequest(req);
    if (!id.ok()) return id.status();
    label[*id] = prompts[i];
  }
  std::printf(
      "running %zu requests (the first with n=2: two completions share its prompt "
      "blocks)\n\n",
      prompts.size());
  OccupancyReport peak;
  std::map<std::pair<int64_t, int>, std::string> outputs;
  while (e.HasWork()) {
    auto outs = e.Step();
    if (!outs.ok()) return outs.status();
    for (const SequenceOutput& o : *outs) outputs[{o.request_id, o.index}] += o.new_text;
    OccupancyReport now = e.KvReport();
    if (now.tokens_stored > peak.tokens_stored) peak = now;
  }
  for (const auto& [key, out] : outputs) {
    std::printf("[request %ld.%d] %s|%s\n\n", (long)key.first, key.second, label[key.first].c_str(),
                out.c_str());
  }
  const EngineStats st = e.stats();
  std::printf(
      "%ld steps, %ld tokens generated, %ld prompt tokens computed, %ld preemptions, "
      "at most %d sequences at once\n\n",
      (long)st.steps, (long)st.generated_tokens, (long)st.prefill_tokens, (long)st.preemptions,
      st.max_running);
  std::printf("KV cache at its fullest:\n%s\n", peak.ToText().c_str());
  std::printf("KV cache at the end (every block back in the pool):\n%s",
              e.KvReport().ToText().c_str());
  return absl::OkStatus();
}

}  // namespace

int DemoMain(int argc, char** argv) {
  EngineFlags ef;
  ef.max_model_len = 256;
  ef.max_num_seqs = 8;
  ef.max_num_batched_tokens = 128;
  ef.kv_cache_memory = "1MiB";
  int n_tokens = 48;
  Args a("demo", "pagedinfer demo [-m MODEL] [options]",
         {"pagedinfer demo", "pagedinfer demo -m stories260K.gguf --kv-dtype q8_0",
          "pagedinfer demo --kv-layout contiguous"});
  ef.Register(a);
  a.Add("-n,--n-predict", &n_tokens, "tokens to generate per request");
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  std::printf("pagedinfer %s\n\n", BuildInfo().c_str());

  bool synthetic = false;
  if (ef.model.empty()) {
    auto path = CachedSynthModel("tiny", "Q4_K_M");
    if (!path.ok()) return Fail(path.status());
    ef.model = *path;
    synthetic = true;
  }
  auto config = ef.ToConfig();
  if (!config.ok()) return Fail(config.status());
  auto model = Model::Load(ef.model);
  if (!model.ok()) return Fail(model.status());
  const Model& m = **model;
  const ModelConfig& c = m.config();
  std::printf("model: %s\n  %s, dim %d, %d layers, %d heads / %d kv heads; weights: %s\n\n",
              ef.model.c_str(), c.arch.c_str(), c.dim, c.n_layers, c.n_heads, c.n_kv_heads,
              m.WeightFormat().c_str());
  if (synthetic) {
    std::printf(
        "(the weights are random, so the text below is word salad: the demo shows the\n"
        " engine at work; run `pagedinfer demo -m your-model.gguf` for real text)\n\n");
  }

  std::string device;
  auto backend = ef.MakeBackend(m, *config, &device);
  if (!backend.ok()) return Fail(backend.status());
  std::printf("device: %s\n\n", device.c_str());
  auto engine = Engine::Create(m, *config, std::move(*backend), /*quiet=*/true);
  if (!engine.ok()) return Fail(engine.status());
  Engine& e = **engine;
  std::printf("memory ledger:\n%s\n%s\n\n", e.ledger().ToText().c_str(), e.pool_summary().c_str());

  if (absl::Status s = RunDemoRequests(m, e, n_tokens); !s.ok()) return Fail(s);
  return 0;
}

}  // namespace pinfer::cli
