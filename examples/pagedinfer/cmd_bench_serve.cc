// pagedinfer bench-serve: a serving benchmark for any OpenAI-compatible server, with vLLM's
// benchmark_serving flags and report: a seeded workload of streamed completions at a request
// rate (Poisson arrivals, or all at once) with a cap on requests in flight; throughput, TTFT,
// TPOT, ITL and end-to-end latency; failures counted with their errors.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/serve/client.h"
#include "bench/serve/compare.h"
#include "bench/serve/report.h"
#include "bench/serve/requests.h"
#include "bench/serve/server_api.h"
#include "bench/serve/stats.h"
#include "bench/serve/workload.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"

namespace pinfer::cli {
namespace {

using namespace pinfer::bench_serve;

struct Flags {
  std::string url = "http://127.0.0.1:8080/v1", model, api_key, backend = "openai";
  int num_prompts = 100, max_concurrency = 0, vocab_size = 0;
  int64_t seed = 0;
  std::string request_rate = "inf", dataset_name = "random", dataset_path;
  RandomLengths lengths;
  std::string prompt_kind = "ids", percentiles = "99", format = "text", result_file, label;
  bool summarize = false;
  std::string plot, title = "bench-serve";
  bool no_ignore_eos = false, ignore_eos_flag = false, no_progress = false, detailed = false;
  double temperature = 0, request_timeout = 600, ready_timeout = 0;
};

void Register(Args& a, Flags& f) {
  a.Add("--url,--base-url", &f.url, "the server's OpenAI API base URL, ending in /v1");
  a.Add("--model", &f.model, "model name sent in requests (default: the first of /v1/models)");
  a.Add("--api-key", &f.api_key, "sent as 'Authorization: Bearer KEY' (default $OPENAI_API_KEY)");
  a.Add("--backend", &f.backend, "openai (/v1/completions) or openai-chat (/v1/chat/completions)");
  a.Add("--num-prompts", &f.num_prompts, "requests in the workload");
  a.Add("--request-rate", &f.request_rate,
        "requests per second, Poisson arrivals; inf: all at once");
  a.Add("--max-concurrency", &f.max_concurrency,
        "most requests in flight (0: no cap); later arrivals wait for a free slot");
  a.Add("--seed", &f.seed, "seed of the lengths, prompts and arrivals");
  a.Add("--dataset-name", &f.dataset_name,
        "random (uniform lengths) or lengths (PROMPT_LEN OUTPUT_LEN pairs of --dataset-path)");
  a.Add("--dataset-path", &f.dataset_path, "file of length pairs, one 'PROMPT OUTPUT' a line");
  a.Add("--random-input-len", &f.lengths.input_len, "mean prompt tokens (random)");
  a.Add("--random-output-len", &f.lengths.output_len, "mean output tokens (random)");
  a.Add("--random-range-ratio", &f.lengths.range_ratio,
        "lengths uniform in [L*(1-r), L*(1+r)] (random), 0 <= r < 1");
  a.Add("--prompt-kind", &f.prompt_kind,
        "ids (token-id prompts) or text (words fitted to the length with the server's "
        "/tokenize)");
  a.Add("--vocab-size", &f.vocab_size,
        "ids: draw ids from [3, N) instead of from /tokenize (for servers without it)");
  a.Add("--temperature", &f.temperature, "sampling temperature sent (0: greedy)");
  a.AddSwitch("--ignore-eos", &f.ignore_eos_flag,
              "send ignore_eos so outputs are the workload's lengths (the default)");
  a.AddSwitch("--no-ignore-eos", &f.no_ignore_eos, "let outputs end at end-of-sequence");
  a.Add("--request-timeout", &f.request_timeout,
        "seconds a connect or a silent stream may take before the request fails");
  a.Add("--ready-check-timeout-sec", &f.ready_timeout,
        "first wait up to this many seconds for GET /v1/models to answer 200 (a server still "
        "loading); 0: do not wait");
  a.Add("--metric-percentiles", &f.percentiles, "percentiles reported, e.g. 50,90,99");
  a.Add("-o,--output", &f.format, "text (vLLM's result block) or json, on stdout");
  a.Add("--result-file", &f.result_file, "also write the JSON result to FILE");
  a.AddSwitch("--save-detailed", &f.detailed,
              "the JSON result holds each request's lengths, TTFT, ITLs, start and error");
  a.AddSwitch("--no-progress", &f.no_progress, "no progress line on stderr");
  a.Add("--label", &f.label, "names this server and configuration in the JSON (and --summarize)");
  a.AddSwitch("--summarize", &f.summarize,
              "no run: compare the JSON results given as arguments (a Markdown table of each, "
              "and ratios of the first label to the others at each rate)");
  a.Add("--plot", &f.plot, "--summarize: also write an SVG of output tok/s and p99 TTFT");
  a.Add("--title", &f.title, "--summarize: the plot's title");
}

int Summarize(const Flags& f, const std::vector<std::string>& files) {
  if (files.empty()) {
    return Fail(absl::InvalidArgumentError("--summarize takes bench-serve JSON result files"), 2);
  }
  std::vector<RunPoint> points;
  for (const std::string& path : files) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in) return Fail(absl::NotFoundError(absl::StrCat("cannot read ", path)));
    auto p = RunPointFromJson(ss.str());
    if (!p.ok())
      return Fail(absl::InvalidArgumentError(absl::StrCat(path, ": ", p.status().message())));
    points.push_back(*p);
  }
  std::fputs(CompareMarkdown(points).c_str(), stdout);
  if (!f.plot.empty()) {
    std::ofstream out(f.plot);
    if (!(out << CompareSvg(points, f.title))) {
      return Fail(absl::UnavailableError(absl::StrCat("cannot write ", f.plot)));
    }
  }
  return 0;
}

std::string Now() {
  char buf[64];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
  return buf;
}

ProgressFn MakeProgress(bool enabled) {
  if (!enabled) return {};
  const bool tty = isatty(STDERR_FILENO);
  return [tty, last = -1.0](const Progress& p) mutable {
    const bool end = p.finished == p.total;
    if (!tty && !end && p.elapsed_s - last < 10) return;  // a line every 10 s into a log
    last = p.elapsed_s;
    std::fprintf(stderr,
                 "%sbench-serve: %d/%d done (%d failed), %d in flight, %d waiting, %.1f s%s",
                 tty ? "\r" : "", p.finished, p.total, p.failed, p.in_flight, p.waiting,
                 p.elapsed_s, tty && !end ? "" : "\n");
    std::fflush(stderr);
  };
}

absl::StatusOr<std::vector<BenchRequest>> Workload(const Flags& f, double rate,
                                                   const ClientOptions& o) {
  if (f.num_prompts < 1) return absl::InvalidArgumentError("--num-prompts must be at least 1");
  const std::string dataset = f.dataset_path.empty() ? f.dataset_name : "lengths";
  absl::StatusOr<std::vector<LengthPair>> lengths;
  if (dataset == "random") {
    lengths = RandomLengthPairs(f.lengths, f.num_prompts, f.seed);
  } else if (dataset == "lengths") {
    if (f.dataset_path.empty()) {
      return absl::InvalidArgumentError("--dataset-name lengths needs --dataset-path FILE");
    }
    lengths = LengthPairsFromFile(f.dataset_path, f.num_prompts);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--dataset-name '", f.dataset_name, "': choose random or lengths"));
  }
  if (!lengths.ok()) return lengths.status();
  auto kind = ParsePromptKind(f.prompt_kind);
  if (!kind.ok()) return kind.status();
  if (o.chat && *kind == PromptKind::kIds) {
    return absl::InvalidArgumentError("--backend openai-chat sends text: use --prompt-kind text");
  }
  PromptSource src{*kind, f.vocab_size};
  return BuildRequests(*lengths, PoissonArrivals(f.num_prompts, rate, f.seed), src,
                       ServerTokenizer(o.url, o.api_key), f.seed);
}

std::string Describe(const Flags& f) {
  if (!f.dataset_path.empty()) return absl::StrCat("lengths from ", f.dataset_path);
  return absl::StrFormat("random: input %d, output %d, range ratio %g", f.lengths.input_len,
                         f.lengths.output_len, f.lengths.range_ratio);
}

// The flags that need checking, checked: InvalidArgument naming the flag.
struct Checked {
  ClientOptions options;
  double rate = 0;
  std::vector<double> percentiles;
};

absl::Status Check(const Flags& f, Checked* c) {
  auto url = ParseBaseUrl(f.url);
  if (!url.ok()) return url.status();
  ClientOptions& o = c->options;
  o.url = *url;
  o.api_key = f.api_key;
  o.model = f.model;
  o.ignore_eos = !f.no_ignore_eos;
  o.temperature = f.temperature;
  o.request_timeout_s = f.request_timeout;
  if (f.backend != "openai" && f.backend != "openai-chat") {
    return absl::InvalidArgumentError("--backend: choose openai or openai-chat");
  }
  o.chat = f.backend == "openai-chat";
  if (f.format != "text" && f.format != "json") {
    return absl::InvalidArgumentError("-o: choose text or json");
  }
  if (f.max_concurrency < 0) return absl::InvalidArgumentError("--max-concurrency must be >= 0");
  if (!(f.request_timeout > 0)) return absl::InvalidArgumentError("--request-timeout must be > 0");
  if (!(f.ready_timeout >= 0)) {
    return absl::InvalidArgumentError("--ready-check-timeout-sec must be >= 0");
  }
  auto rate = ParseRequestRate(f.request_rate);
  if (!rate.ok()) return rate.status();
  c->rate = *rate;
  auto percentiles = ParsePercentiles(f.percentiles);
  if (!percentiles.ok()) return percentiles.status();
  c->percentiles = *percentiles;
  return absl::OkStatus();
}

}  // namespace

int BenchServeMain(int argc, char** argv) {
  Flags f;
  if (const char* key = std::getenv("OPENAI_API_KEY")) f.api_key = key;
  Args a("bench-serve",
         "pagedinfer bench-serve --url http://127.0.0.1:PORT/v1 [--model ID] [--num-prompts N] "
         "[--request-rate R|inf] [--max-concurrency C] [--seed S] [-o text|json]",
         {"pagedinfer bench-serve --url http://127.0.0.1:8080/v1 --num-prompts 200 "
          "--request-rate 4 --random-input-len 256 --random-output-len 64",
          "pagedinfer bench-serve --url http://127.0.0.1:8081/v1 --max-concurrency 16 "
          "--dataset-path lengths.txt -o json --result-file run.json",
          "pagedinfer bench-serve --summarize ours-*.json theirs-*.json --plot serve.svg"});
  Register(a, f);
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  if (f.summarize) return Summarize(f, a.positional());
  if (!a.positional().empty()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("unexpected argument '", a.positional()[0],
                                                        "' (result files go with --summarize)")),
                2);
  }
  Checked c;
  if (absl::Status s = Check(f, &c); !s.ok()) return Fail(s, 2);
  ClientOptions& o = c.options;
  if (f.ready_timeout > 0) {
    if (absl::Status s = WaitUntilReady(o.url, o.api_key, f.ready_timeout); !s.ok()) {
      return Fail(s);
    }
  }
  if (o.model.empty()) {
    auto id = FirstModelId(o.url, o.api_key);
    if (!id.ok()) return Fail(id.status());
    o.model = *id;
  }
  auto requests = Workload(f, c.rate, o);
  if (!requests.ok()) return Fail(requests.status());
  std::fprintf(
      stderr, "bench-serve: %d requests (%s; %s prompts) to %s, model %s, rate %s%s\n",
      f.num_prompts, Describe(f).c_str(), f.prompt_kind.c_str(), o.url.ToString().c_str(),
      o.model.c_str(), f.request_rate.c_str(),
      f.max_concurrency > 0 ? absl::StrCat(", max concurrency ", f.max_concurrency).c_str() : "");
  RunInfo info{Now(),
               f.backend,
               f.label,
               o.model,
               o.url.ToString(),
               Describe(f),
               f.prompt_kind,
               f.num_prompts,
               c.rate,
               f.max_concurrency,
               static_cast<uint64_t>(f.seed),
               0};
  auto run = RunBenchmark(o, *requests, f.max_concurrency, MakeProgress(!f.no_progress), 0.5);
  if (!run.ok()) return Fail(run.status());
  info.peak_in_flight = run->peak_in_flight;
  const BenchMetrics m = ComputeMetrics(run->results, run->duration_s, c.percentiles);
  const std::string json = JsonReport(m, info, run->results, f.detailed);
  if (!f.result_file.empty()) {
    std::ofstream out(f.result_file);
    if (!(out << json)) {
      return Fail(absl::UnavailableError(absl::StrCat("cannot write ", f.result_file)));
    }
  }
  std::fputs(f.format == "json" ? json.c_str() : TextReport(m, info, run->results).c_str(), stdout);
  return 0;
}

}  // namespace pinfer::cli
