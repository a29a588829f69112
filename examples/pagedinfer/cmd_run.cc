// pagedinfer run: generate text from a prompt. Only the generated text goes to stdout.
#include <cstdio>
#include <fstream>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/engine.h"
#include "engine/model/model.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/engine_flags.h"
#include "examples/pagedinfer/read_text.h"
#include "examples/pagedinfer/sampling_flags.h"

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

struct RunFlags {
  EngineFlags engine;
  SamplingFlags sampling;
  std::string prompt, prompt_file, prompt_ids, logits_out, stop, memory_report_json;
  bool kv_report = false, memory_report = false;

  void Register(Args& a) {
    engine.Register(a);
    a.Add("-p,--prompt", &prompt, "prompt text (empty: start from BOS)");
    a.Add("-f,--file", &prompt_file, "read the prompt text from this file (instead of -p)");
    a.Add("--prompt-ids", &prompt_ids, "prompt as token ids, comma-separated (instead of -p)");
    a.Add("-n,--n-predict", &sampling.params.max_tokens, "tokens to generate");
    sampling.Register(a);
    a.Add("--stop", &stop, "stop string (generation ends before it)");
    a.Add("--logits-out", &logits_out, "write the logits after the last prompt token (float32 LE)");
    a.AddSwitch("--kv-report", &kv_report, "print the KV occupancy report after generation");
    a.AddSwitch("--memory-report", &memory_report,
                "print the memory ledger and the memory report by stage after generation");
    a.Add("--memory-report-json", &memory_report_json,
          "write {\"ledger\": ..., \"report\": ...} as JSON to this file after generation");
  }
};

// The prompt's ids: --prompt-ids as given, else -p or -f's text encoded (BOS alone when empty).
absl::StatusOr<std::vector<int32_t>> PromptIds(const RunFlags& f, const Tokenizer& tok) {
  if (!f.prompt_ids.empty()) return ParseIds(f.prompt_ids);
  std::string text = f.prompt;
  if (!f.prompt_file.empty()) {
    auto read = ReadTextFile(f.prompt_file);
    if (!read.ok()) return read.status();
    text = *read;
  }
  std::vector<int32_t> ids = tok.Encode(text, /*add_special=*/true);
  if (ids.empty() && tok.bos() >= 0) ids.push_back(tok.bos());
  return ids;
}

// Runs the request, the text to stdout as it comes; with logits_out, the first logits row.
absl::Status Generate(Engine& e, GenerationRequest req, const std::string& logits_out) {
  std::vector<float> first_logits;
  if (!logits_out.empty()) {
    e.SetLogitsObserver([&](int64_t, int, const float* logits, int n_vocab) {
      if (first_logits.empty()) first_logits.assign(logits, logits + n_vocab);
    });
  }
  // -n 0 with --logits-out: run the prompt and sample nothing.
  const bool logits_only = req.params.max_tokens == 0;
  if (logits_only) req.params.max_tokens = 1;
  auto rid = e.AddRequest(std::move(req));
  if (!rid.ok()) return rid.status();
  while (e.HasWork()) {
    auto outs = e.Step();
    if (!outs.ok()) return outs.status();
    if (logits_only) continue;
    for (const SequenceOutput& o : *outs) {
      std::fwrite(o.new_text.data(), 1, o.new_text.size(), stdout);
      std::fflush(stdout);
    }
  }
  if (!logits_only) std::fputc('\n', stdout);
  if (logits_out.empty()) return absl::OkStatus();
  std::ofstream f(logits_out, std::ios::binary);
  f.write(reinterpret_cast<const char*>(first_logits.data()),
          static_cast<std::streamsize>(first_logits.size() * sizeof(float)));
  return f ? absl::OkStatus() : absl::UnavailableError("cannot write " + logits_out);
}

}  // namespace

int RunMain(int argc, char** argv) {
  RunFlags f;
  f.engine.max_num_seqs = 1;  // one prompt: the pool holds one max_model_len sequence
  f.sampling.params.max_tokens = 128;
  Args a("run", "pagedinfer run -m MODEL [-p TEXT | -f FILE | --prompt-ids 1,2,3] [-n N] [options]",
         {"pagedinfer run -m stories260K.gguf -n 200 --temp 0",
          "pagedinfer run -m model.gguf -p \"The capital of France is\" -n 32 --kv-dtype q8_0",
          "pagedinfer run -m model.gguf --prompt-ids 1,403 -n 0 --logits-out logits.f32"});
  f.Register(a);
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  if (f.engine.model.empty()) {
    return Fail(absl::InvalidArgumentError("-m MODEL is required (see --help)"));
  }
  if ((!f.prompt.empty()) + (!f.prompt_file.empty()) + (!f.prompt_ids.empty()) > 1) {
    return Fail(absl::InvalidArgumentError("give one of -p, -f and --prompt-ids"), 2);
  }
  GenerationRequest req;
  req.params = f.sampling.Resolved();
  // llama.cpp's rule: -1 draws a seed; it is printed so that the run can be repeated.
  if (!req.params.seed) req.params.seed = std::random_device{}();
  if (!f.stop.empty()) req.params.stop.push_back(f.stop);
  auto config = f.engine.ToConfig();
  if (!config.ok()) return Fail(config.status());
  auto loaded = LoadEngine(f.engine, *config);
  if (!loaded.ok()) return Fail(loaded.status());
  auto ids = PromptIds(f, loaded->model->tokenizer());
  if (!ids.ok()) return Fail(ids.status(), 2);
  req.prompt = *ids;
  const uint64_t seed = *req.params.seed;
  Engine& e = *loaded->engine;
  if (absl::Status s = Generate(e, std::move(req), f.logits_out); !s.ok()) return Fail(s);
  const EngineStats st = e.stats();
  std::fprintf(stderr, "%zu prompt tokens, %ld generated in %ld steps (seed %llu)\n", ids->size(),
               (long)st.generated_tokens, (long)st.steps, static_cast<unsigned long long>(seed));
  if (f.kv_report) std::fprintf(stderr, "%s", e.KvReport().ToText().c_str());
  if (f.memory_report) {
    std::fprintf(stderr, "%s\n%s", e.ledger().ToText().c_str(), e.memory_report().ToText().c_str());
  }
  if (!f.memory_report_json.empty()) {
    std::ofstream out(f.memory_report_json);
    out << "{\"ledger\": " << e.ledger().ToJson() << ",\n\"report\": " << e.memory_report().ToJson()
        << "}\n";
    if (!out) return Fail(absl::UnavailableError("cannot write " + f.memory_report_json));
  }
  return 0;
}

}  // namespace pinfer::cli
