// pagedinfer run: generate text from a prompt. Only the generated text goes to stdout.
#include <cstdio>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/engine.h"
#include "engine/model/model.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/engine_flags.h"
#include "examples/pagedinfer/read_text.h"

namespace pinfer::cli {
namespace {

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id)) {
      return absl::InvalidArgumentError(
          "--prompt-ids takes comma-separated integers, e.g. 1,403,407");
    }
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

int RunMain(int argc, char** argv) {
  EngineFlags ef;
  std::string prompt, prompt_file, prompt_ids, logits_out, stop;
  SamplingParams sp;
  sp.max_tokens = 128;
  bool kv_report = false, memory_report = false;
  Args a("run", "pagedinfer run -m MODEL [-p TEXT | --prompt-ids 1,2,3] [-n N] [options]",
         {"pagedinfer run -m stories260K.gguf -n 200 --temp 0",
          "pagedinfer run -m model.gguf -p \"The capital of France is\" -n 32 --kv-dtype q8_0",
          "pagedinfer run -m model.gguf --prompt-ids 1,403 -n 0 --logits-out logits.f32"});
  ef.Register(a);
  a.Add("-p,--prompt", &prompt, "prompt text (empty: start from BOS)");
  a.Add("-f,--file", &prompt_file, "read the prompt text from this file (instead of -p)");
  a.Add("--prompt-ids", &prompt_ids, "prompt as token ids, comma-separated (instead of -p)");
  a.Add("-n,--n-predict", &sp.max_tokens, "tokens to generate");
  a.Add("--temp", &sp.temperature, "temperature (0: greedy)");
  a.Add("--top-k", &sp.top_k, "top-k (0: off)");
  a.Add("--top-p", &sp.top_p, "top-p (1: off)");
  a.Add("--min-p", &sp.min_p, "min-p (0: off)");
  a.Add("--repeat-penalty", &sp.repetition_penalty, "repetition penalty (1: off)");
  int64_t seed = 0;
  a.Add("-s,--seed", &seed, "sampling seed");
  a.Add("--stop", &stop, "stop string (generation ends before it)");
  a.Add("--logits-out", &logits_out, "write the logits after the last prompt token (float32 LE)");
  a.AddSwitch("--kv-report", &kv_report, "print the KV occupancy report after generation");
  a.AddSwitch("--memory-report", &memory_report,
              "print the memory ledger and the memory report by stage after generation");
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  sp.seed = static_cast<uint64_t>(seed);
  if (!stop.empty()) sp.stop.push_back(stop);
  if (ef.model.empty())
    return Fail(absl::InvalidArgumentError("-m MODEL is required (see --help)"));

  if (!prompt_file.empty()) {
    if (!prompt.empty() || !prompt_ids.empty()) {
      return Fail(absl::InvalidArgumentError("give one of -p, -f and --prompt-ids"), 2);
    }
    auto text = ReadTextFile(prompt_file);
    if (!text.ok()) return Fail(text.status(), 2);
    prompt = *text;
  }
  auto config = ef.ToConfig();
  if (!config.ok()) return Fail(config.status());
  auto loaded = LoadEngine(ef, *config);
  if (!loaded.ok()) return Fail(loaded.status());
  const Tokenizer& tok = loaded->model->tokenizer();
  GenerationRequest req;
  req.params = sp;
  if (!prompt_ids.empty()) {
    auto ids = ParseIds(prompt_ids);
    if (!ids.ok()) return Fail(ids.status());
    req.prompt = *ids;
  } else {
    req.prompt = tok.Encode(prompt, /*add_special=*/true);
    if (req.prompt.empty() && tok.bos() >= 0) req.prompt.push_back(tok.bos());
  }
  Engine& e = *loaded->engine;
  std::vector<float> first_logits;
  if (!logits_out.empty()) {
    e.SetLogitsObserver([&](int64_t, int, const float* logits, int n_vocab) {
      if (first_logits.empty()) first_logits.assign(logits, logits + n_vocab);
    });
  }
  // -n 0 with --logits-out: run the prompt and sample nothing.
  const bool logits_only = sp.max_tokens == 0;
  if (logits_only) req.params.max_tokens = 1;
  auto rid = e.AddRequest(req);
  if (!rid.ok()) return Fail(rid.status());
  while (e.HasWork()) {
    auto outs = e.Step();
    if (!outs.ok()) return Fail(outs.status());
    if (logits_only) continue;
    for (const SequenceOutput& o : *outs) {
      std::fwrite(o.new_text.data(), 1, o.new_text.size(), stdout);
      std::fflush(stdout);
    }
  }
  if (!logits_only) std::fputc('\n', stdout);
  if (!logits_out.empty()) {
    std::ofstream f(logits_out, std::ios::binary);
    f.write(reinterpret_cast<const char*>(first_logits.data()),
            static_cast<std::streamsize>(first_logits.size() * sizeof(float)));
    if (!f) return Fail(absl::UnavailableError("cannot write " + logits_out));
  }
  const EngineStats st = e.stats();
  std::fprintf(stderr, "%ld prompt tokens, %ld generated in %ld steps\n", (long)req.prompt.size(),
               (long)st.generated_tokens, (long)st.steps);
  if (kv_report) std::fprintf(stderr, "%s", e.KvReport().ToText().c_str());
  if (memory_report) {
    std::fprintf(stderr, "%s\n%s", e.ledger().ToText().c_str(), e.memory_report().ToText().c_str());
  }
  return 0;
}

}  // namespace pinfer::cli
