// pagedinfer quality: the weights x KV-format table of perplexity and KL divergence.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine/eval/quality.h"
#include "engine/memory/memory_ledger.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/read_text.h"
#include "loaders/absl_compat.h"
#include "nlohmann/json.hpp"

namespace pinfer::cli {
namespace {

std::string Markdown(const QualityTable& t) {
  std::string s = absl::StrFormat(
      "Model `%s`, %lld tokens of text, context %d: %d chunks, %lld tokens scored per run.\n"
      "Cells: perplexity / mean KL divergence (nats) against %s weights + %s KV.\n\n",
      t.model_path, static_cast<long long>(t.n_tokens), t.n_ctx, t.n_chunks,
      static_cast<long long>(t.scored), t.rows[0].weight_format, Sv(KvDtypeName(t.kv_formats[0])));
  s += "| weights | weight bytes |";
  for (KvDtype d : t.kv_formats) s += absl::StrFormat(" KV %s |", Sv(KvDtypeName(d)));
  s += "\n|---|---:|";
  for (size_t i = 0; i < t.kv_formats.size(); ++i) s += "---:|";
  s += "\n| *KV bytes / token* | |";
  for (uint64_t b : t.kv_bytes_per_token) s += absl::StrFormat(" *%d* |", b);
  s += "\n";
  for (const QualityRow& r : t.rows) {
    s += absl::StrFormat("| %s | %s |", r.weight_format, FormatBytes(r.weight_bytes));
    for (const QualityCell& c : r.cells) {
      s += absl::StrFormat(" %.4f / %.5f |", c.ppl.ppl, c.kl.mean_kl);
    }
    s += "\n";
  }
  // How far the weight loss and the KV loss add up: KL(w, kv) - KL(w, ref KV) - KL(ref w, kv).
  s += "\nTop-1 agreement with the reference (%):\n\n| weights |";
  for (KvDtype d : t.kv_formats) s += absl::StrFormat(" KV %s |", Sv(KvDtypeName(d)));
  s += "\n|---|";
  for (size_t i = 0; i < t.kv_formats.size(); ++i) s += "---:|";
  s += "\n";
  for (const QualityRow& r : t.rows) {
    s += absl::StrFormat("| %s |", r.weight_format);
    for (const QualityCell& c : r.cells) s += absl::StrFormat(" %.2f |", 100 * c.kl.top1_agreement);
    s += "\n";
  }
  s += "\nAdditivity: KL(weights, KV) - KL(weights, ref KV) - KL(ref weights, KV), nats "
       "(0: the two losses add up exactly):\n\n| weights |";
  for (KvDtype d : t.kv_formats) s += absl::StrFormat(" KV %s |", Sv(KvDtypeName(d)));
  s += "\n|---|";
  for (size_t i = 0; i < t.kv_formats.size(); ++i) s += "---:|";
  s += "\n";
  for (const QualityRow& r : t.rows) {
    s += absl::StrFormat("| %s |", r.weight_format);
    for (size_t k = 0; k < r.cells.size(); ++k) {
      const double extra =
          r.cells[k].kl.mean_kl - r.cells[0].kl.mean_kl - t.rows[0].cells[k].kl.mean_kl;
      s += absl::StrFormat(" %+.5f |", extra);
    }
    s += "\n";
  }
  s += absl::StrFormat("\n(%d x %d runs in %.1f s)\n", t.rows.size(), t.kv_formats.size(),
                       t.seconds);
  return s;
}

std::string Json(const QualityTable& t) {
  nlohmann::json j;
  j["model"] = t.model_path;
  j["n_ctx"] = t.n_ctx;
  j["n_tokens"] = t.n_tokens;
  j["n_chunks"] = t.n_chunks;
  j["scored"] = t.scored;
  j["seconds"] = t.seconds;
  for (size_t k = 0; k < t.kv_formats.size(); ++k) {
    j["kv_formats"].push_back({{"name", std::string(KvDtypeName(t.kv_formats[k]))},
                               {"bytes_per_token", t.kv_bytes_per_token[k]}});
  }
  for (const QualityRow& r : t.rows) {
    nlohmann::json row = {{"weights", r.weight_format},
                          {"weight_format", r.weight_summary},
                          {"weight_bytes", r.weight_bytes}};
    for (size_t k = 0; k < r.cells.size(); ++k) {
      const QualityCell& c = r.cells[k];
      row["cells"].push_back({{"kv", std::string(KvDtypeName(t.kv_formats[k]))},
                              {"ppl", c.ppl.ppl},
                              {"ppl_stderr", c.ppl.ppl_stderr},
                              {"mean_kl", c.kl.mean_kl},
                              {"kl_stderr", c.kl.kl_stderr},
                              {"p99_kl", c.kl.p99_kl},
                              {"top1_agreement", c.kl.top1_agreement}});
    }
    j["rows"].push_back(row);
  }
  return j.dump(2) + "\n";
}

}  // namespace

int QualityMain(int argc, char** argv) {
  std::string model_path, text_path, format = "md", weights = "F32,F16,Q8_0,Q5_1,Q4_0,Q4_K_M",
                                     kv = "f32,f16,bf16,q8_0,q4_0,fp8", temp_dir;
  int ctx = 128, threads = 0;
  bool quiet = false;
  Args a("quality",
         "pagedinfer quality -m MODEL.gguf -f TEXT [--ctx N] [-o md|json]\n"
         "From one F32/F16 model, makes each weight format with quantize (temporary files) and\n"
         "runs it with each KV format over TEXT: perplexity and KL divergence against the first\n"
         "weight format with the first KV format, weight bytes and KV bytes per token.",
         {"pagedinfer quality -m stories260K.gguf -f data/stories.txt --ctx 128",
          "pagedinfer quality -m model-f16.gguf -f wiki.txt --weights F16,Q4_K_M --kv f16,q8_0 -o "
          "json"});
  a.Add("-m,--model", &model_path, "F32/F16/BF16 model file (GGUF)");
  a.Add("-f,--file", &text_path, "text file to score");
  a.Add("-c,--ctx", &ctx, "tokens per chunk (context)");
  a.Add("-o,--output", &format, "md or json");
  a.Add("--weights", &weights, "comma-separated weight formats; the first is the reference");
  a.Add("--kv", &kv, "comma-separated KV formats; the first is the reference");
  a.Add("-t,--threads", &threads, "CPU threads (0: all)");
  a.Add("--temp-dir", &temp_dir, "folder for the quantized copies (default: system temp)");
  a.AddSwitch("-q,--quiet", &quiet, "no progress lines on stderr");
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  if (model_path.empty() || text_path.empty()) {
    std::fprintf(stderr, "error: -m MODEL and -f TEXT are required (see --help)\n");
    return 2;
  }
  if (format != "md" && format != "json") {
    std::fprintf(stderr, "error: -o must be md or json, not '%s'\n", format.c_str());
    return 2;
  }
  QualityOptions opt;
  opt.n_ctx = ctx;
  opt.threads = threads;
  opt.temp_dir = temp_dir;
  opt.weight_formats = absl::StrSplit(weights, ',', absl::SkipEmpty());
  opt.kv_formats.clear();
  for (absl::string_view name : absl::StrSplit(kv, ',', absl::SkipEmpty())) {
    absl::StatusOr<KvDtype> d = ParseKvDtype(std::string_view(name.data(), name.size()));
    if (!d.ok()) {
      return Fail(d.status(), 2);
    }
    opt.kv_formats.push_back(*d);
  }
  if (!quiet) opt.log = [](const std::string& l) { std::fprintf(stderr, "%s\n", l.c_str()); };
  absl::StatusOr<std::string> text = ReadTextFile(text_path);
  if (!text.ok()) {
    return Fail(text.status(), 2);
  }
  absl::StatusOr<QualityTable> t = BuildQualityTable(model_path, *text, opt);
  if (!t.ok()) {
    return Fail(t.status(), t.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1);
  }
  std::fputs((format == "json" ? Json(*t) : Markdown(*t)).c_str(), stdout);
  return 0;
}

}  // namespace pinfer::cli
