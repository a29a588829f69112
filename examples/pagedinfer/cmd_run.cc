// pagedinfer run: generate text from a prompt. Only the generated text goes to stdout.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine/engine.h"
#include "engine/memory/memory_ledger.h"
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
    a.AddSwitch("--kv-report", &kv_report,
                "print the KV occupancy report after generation, and the blocks each layer "
                "group held as the sequence grew (sliding windows let theirs go)");
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

// With --kv-report: the most blocks each layer group held at the peak of a step (the step
// observer: before a window table lets its out-of-window blocks go), by stretch of `every`
// tokens and over the run, beside the ledger's rule for a sequence of the run's length
// decoding a token a step and its count for a max_model_len sequence.
class KvTrace {
 public:
  KvTrace(const Engine& e, int64_t final_len) {
    const int64_t bs = e.cache().block_size();
    every_ = std::max<int64_t>(bs, (final_len / 8 + bs - 1) / bs * bs);
    next_ = every_;
    for (const KvGroupLine& g : e.ledger().kv_groups) names_.push_back(Name(g));
    run_.assign(names_.size(), 0);
    stretch_.assign(names_.size(), 0);
  }

  void Observe(const Engine& e) {
    const OccupancyReport r = e.KvReport();
    if (r.groups.size() != run_.size()) return;
    for (const SeqOccupancy& s : r.seqs) tokens_ = std::max(tokens_, s.tokens);
    for (size_t g = 0; g < run_.size(); ++g) {
      run_[g] = std::max(run_[g], r.groups[g].blocks_used);
      stretch_[g] = std::max(stretch_[g], r.groups[g].blocks_used);
    }
    if (tokens_ >= next_) EndStretch(e);
  }

  std::string Text(const Engine& e) {
    if (tokens_ > last_) EndStretch(e);
    const EngineConfig& c = e.config();
    const KvCacheConfig kc =
        LedgerKvConfig(e.model().config(), c.kv_dtype, c.kv_layout, c.block_size, c.max_model_len);
    std::vector<int64_t> ledger;
    for (const KvGroupLine& g : e.ledger().kv_groups) ledger.push_back(g.blocks_per_sequence);
    return absl::StrCat(
        "KV blocks by layer group, the most at the peak of a step (before out-of-window blocks "
        "go):\n",
        rows_, "  each group's most over the run: ", Blocks(run_, e), "\n",
        "  the ledger's rule for a sequence of ", tokens_,
        " tokens decoding a token a step: ", Blocks(KvSequenceGroupBlocks(kc, tokens_, 1), e), "\n",
        "  the ledger's count for a sequence of max_model_len ", c.max_model_len,
        " (steps of up to ", c.max_num_batched_tokens, " tokens): ", Blocks(ledger, e), "\n");
  }

 private:
  static std::string Name(const KvGroupLine& g) {
    const std::string tables = absl::StrCat(g.tables, g.tables == 1 ? " table" : " tables");
    return g.window > 0 ? absl::StrCat("window ", g.window, " (", tables, ")")
                        : absl::StrCat("full attention (", tables, ")");
  }
  void EndStretch(const Engine& e) {
    absl::StrAppend(&rows_, absl::StrFormat("  tokens %6d to %6d: %s\n", last_ + 1, tokens_,
                                            Blocks(stretch_, e)));
    last_ = tokens_;
    next_ = (tokens_ / every_ + 1) * every_;
    std::fill(stretch_.begin(), stretch_.end(), 0);
  }
  std::string Blocks(const std::vector<int64_t>& blocks, const Engine& e) const {
    std::string out;
    int64_t all = 0;
    for (size_t g = 0; g < blocks.size() && g < names_.size(); ++g) {
      absl::StrAppend(&out, g ? ", " : "", names_[g], " ", blocks[g]);
      all += blocks[g];
    }
    return absl::StrCat(out, "; ", all, " blocks, ",
                        FormatBytes(static_cast<uint64_t>(all) * e.cache().block_bytes()));
  }

  int64_t every_ = 0, next_ = 0, tokens_ = 0, last_ = 0;
  std::vector<std::string> names_;
  std::vector<int64_t> run_, stretch_;
  std::string rows_;
};

// Runs the request, the text to stdout as it comes; with logits_out, the first logits row;
// with trace, the blocks each layer group holds step by step.
absl::Status Generate(Engine& e, GenerationRequest req, const std::string& logits_out,
                      KvTrace* trace) {
  if (trace != nullptr) e.SetStepObserver([trace](const Engine& en) { trace->Observe(en); });
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
  std::fflush(stdout);  // the text ends before stderr's summary, even when both are one file
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
  std::optional<KvTrace> trace;
  if (f.kv_report) trace.emplace(e, static_cast<int64_t>(ids->size()) + req.params.max_tokens);
  if (absl::Status s = Generate(e, std::move(req), f.logits_out, trace ? &*trace : nullptr);
      !s.ok()) {
    return Fail(s);
  }
  const EngineStats st = e.stats();
  std::fprintf(stderr, "%zu prompt tokens, %ld generated in %ld steps (seed %llu)\n", ids->size(),
               (long)st.generated_tokens, (long)st.steps, static_cast<unsigned long long>(seed));
  if (f.kv_report) {
    std::fprintf(stderr, "%s%s", e.KvReport().ToText().c_str(), trace->Text(e).c_str());
  }
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
