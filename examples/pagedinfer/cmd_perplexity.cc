// pagedinfer perplexity: perplexity of a model over a text file, as llama-perplexity computes
// it, and the KL divergence of its next-token distributions against a saved base run.
#include <cstdio>
#include <memory>
#include <string>

#include "engine/eval/kl_divergence.h"
#include "engine/eval/perplexity.h"
#include "engine/model/model.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/engine_flags.h"
#include "examples/pagedinfer/progress.h"
#include "examples/pagedinfer/read_text.h"

namespace pinfer::cli {
namespace {

// --kl-base (save the scored log-probabilities) or --kl (compare against saved ones).
struct KlSide {
  std::unique_ptr<KlBaseWriter> writer;
  std::unique_ptr<KlBaseReader> reader;
  KlAccumulator acc;

  // rc 0, or the exit code of a failure (reported).
  int Open(const std::string& save, const std::string& compare, const PerplexityPlan& plan,
           int n_vocab) {
    if (!save.empty()) {
      auto w = KlBaseWriter::Create(save, plan, n_vocab);
      if (!w.ok()) return Fail(w.status());
      writer = std::move(*w);
    }
    if (!compare.empty()) {
      auto r = KlBaseReader::Open(compare, plan, n_vocab);
      if (!r.ok()) return Fail(r.status(), 2);
      reader = std::move(*r);
    }
    return 0;
  }
  void Attach(PerplexityCallbacks* cb) {
    if (!writer && !reader) return;
    cb->on_log_probs = [this](int64_t, const float* lp, int nv, int32_t) -> absl::Status {
      if (writer) return writer->Add(lp, nv);
      absl::StatusOr<const float*> base = reader->Next();
      if (!base.ok()) return base.status();
      acc.Add(*base, lp, nv);
      return absl::OkStatus();
    };
  }
  int Report(const PerplexityResult& r, int n_vocab, const std::string& save) {
    if (writer) {
      if (absl::Status s = writer->Close(); !s.ok()) return Fail(s);
      std::printf("saved %lld x %d log-probabilities to %s\n", static_cast<long long>(r.count),
                  n_vocab, save.c_str());
    }
    if (reader) {
      const KlStats k = acc.Result();
      std::printf("Mean KLD: %.6f +/- %.6f\n", k.mean_kl, k.kl_stderr);
      std::printf("99.0%% KLD: %.6f   max KLD: %.6f\n", k.p99_kl, k.max_kl);
      std::printf("Same top-1: %.2f%% of %lld positions\n", 100 * k.top1_agreement,
                  static_cast<long long>(k.count));
    }
    return 0;
  }
};

absl::StatusOr<std::unique_ptr<Model>> LoadWithProgress(const std::string& path) {
  LoadProgress progress(path);
  progress.Stage("mapping the file, binding weights and tokenizer");
  return Model::Load(path);
}

}  // namespace

int PerplexityMain(int argc, char** argv) {
  std::string model_path, text_path, kv = "f16", kl_base, kl;
  int ctx = 512, batch = 0, threads = 0, chunks = 0;
  Args a("perplexity",
         "pagedinfer perplexity -m MODEL -f TEXT [--ctx N] [--batch B] [--kv-dtype D]\n"
         "                      [--kl-base FILE | --kl FILE]\n"
         "Perplexity as llama-perplexity computes it: the text is cut into chunks of N tokens,\n"
         "each evaluated from its start (first token BOS), and the second half of each chunk is\n"
         "scored. --kl-base saves the scored log-probabilities; --kl compares against them\n"
         "(mean KL divergence, top-1 agreement, 99th percentile of KL).",
         {"pagedinfer perplexity -m stories260K.gguf -f data/stories.txt --ctx 128",
          "pagedinfer perplexity -m f16.gguf -f wiki.test.raw --kl-base base.kl",
          "pagedinfer perplexity -m q4_k_m.gguf -f wiki.test.raw --kl base.kl --kv-dtype q8_0"});
  a.Add("-m,--model", &model_path, "model file (GGUF)");
  a.Add("-f,--file", &text_path, "text file to score");
  a.Add("-c,--ctx", &ctx, "tokens per chunk (context)");
  a.Add("-b,--batch", &batch, "tokens per forward pass (0: --ctx); never changes the result");
  a.Add("--kv-dtype", &kv, "KV cache format: f32, f16, bf16, q8_0, q4_0, fp8");
  a.Add("-t,--threads", &threads, "CPU threads (0: all)");
  a.Add("--chunks", &chunks, "score at most this many chunks (0: all)");
  a.Add("--kl-base", &kl_base, "save the scored log-probabilities (float32) to FILE");
  a.Add("--kl", &kl, "compare against a FILE saved with --kl-base");
  EngineFlags ef;
  ef.RegisterDevice(a);
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  if (model_path.empty() || text_path.empty()) {
    std::fprintf(stderr, "error: -m MODEL and -f TEXT are required (see --help)\n");
    return 2;
  }
  if (!kl_base.empty() && !kl.empty()) {
    return Fail(absl::InvalidArgumentError("give --kl-base (save) or --kl (compare), not both"), 2);
  }
  absl::StatusOr<KvDtype> dtype = ParseKvDtype(kv);
  if (!dtype.ok()) return Fail(dtype.status(), 2);
  absl::StatusOr<std::string> text = ReadTextFile(text_path);
  if (!text.ok()) return Fail(text.status(), 2);
  absl::StatusOr<std::unique_ptr<Model>> model = LoadWithProgress(model_path);
  if (!model.ok()) return Fail(model.status());
  absl::StatusOr<PerplexityPlan> plan = PlanPerplexity(**model, *text, ctx, chunks);
  if (!plan.ok()) return Fail(plan.status(), 2);
  const int n_vocab = (*model)->config().n_vocab;
  std::fprintf(stderr,
               "perplexity: %s, %s, KV %s: %zu tokens, %d chunks of %d, scoring %d per chunk\n",
               model_path.c_str(), (*model)->WeightFormat().c_str(), kv.c_str(),
               plan->tokens.size(), plan->n_chunks, plan->n_ctx, plan->scored_per_chunk());

  KlSide kls;
  if (int rc = kls.Open(kl_base, kl, *plan, n_vocab); rc != 0) return rc;
  PerplexityCallbacks cb;
  cb.on_chunk = [](int done, int n, double ppl, double secs) {
    std::printf("[%d/%d] %.4f  (%.1f s)\n", done, n, ppl, secs);
    std::fflush(stdout);
  };
  kls.Attach(&cb);
  PerplexityOptions opt;
  opt.n_ctx = ctx;
  opt.n_batch = batch;
  opt.kv_dtype = *dtype;
  opt.threads = threads;
  std::string device;
  opt.make_backend = [&](int max_tokens) {
    EngineConfig c;
    c.max_num_batched_tokens = max_tokens;
    c.threads = threads;
    auto b = ef.MakeBackend(**model, c, &device);
    if (b.ok()) std::fprintf(stderr, "device: %s\n", device.c_str());
    return b;
  };
  absl::StatusOr<PerplexityResult> r = ComputePerplexity(**model, *plan, opt, cb);
  if (!r.ok()) return Fail(r.status());
  std::printf("Final estimate: PPL = %.4f +/- %.5f  (%lld tokens scored, %.2f s)\n", r->ppl,
              r->ppl_stderr, static_cast<long long>(r->count), r->seconds);
  return kls.Report(*r, n_vocab, kl_base);
}

}  // namespace pinfer::cli
