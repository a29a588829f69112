// BuildQualityTable: quantized copies in a temporary folder, one perplexity run per cell, KL
// against the reference run's log-probabilities held in memory.
#include "engine/eval/quality.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/convert/quantize.h"
#include "engine/model/model.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

// A fresh folder under `parent` (or the system temp folder), removed with its files on scope exit.
class TempFolder {
 public:
  static absl::StatusOr<std::unique_ptr<TempFolder>> Make(const std::string& parent) {
    std::error_code ec;
    const std::filesystem::path base =
        parent.empty() ? std::filesystem::temp_directory_path(ec) : std::filesystem::path(parent);
    std::string templ = (base / "pagedinfer-quality-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot make a temporary folder under ", base.string(), "; give a writable --temp-dir"));
    }
    return std::unique_ptr<TempFolder>(new TempFolder(templ));
  }
  ~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit TempFolder(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

}  // namespace

absl::StatusOr<QualityTable> BuildQualityTable(const std::string& model_path,
                                               const std::string& text,
                                               const QualityOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  if (options.weight_formats.empty() || options.kv_formats.empty()) {
    return absl::InvalidArgumentError("give at least one weight format and one KV format");
  }
  absl::StatusOr<std::unique_ptr<TempFolder>> tmp = TempFolder::Make(options.temp_dir);
  if (!tmp.ok()) return tmp.status();

  QualityTable table;
  table.model_path = model_path;
  table.n_ctx = options.n_ctx;
  table.kv_formats = options.kv_formats;
  std::vector<float> reference;  // log-probs of cell (0, 0), [scored x n_vocab]
  for (size_t wi = 0; wi < options.weight_formats.size(); ++wi) {
    const std::string& wf = options.weight_formats[wi];
    const std::string path = absl::StrCat((*tmp)->path(), "/", wf, ".gguf");
    QuantizeOptions qo;
    qo.threads = options.threads;
    qo.note = [&](const std::string& line) { log(absl::StrCat(wf, ": ", line)); };
    absl::StatusOr<QuantizeSummary> q = QuantizeGguf(model_path, path, wf, qo);
    if (!q.ok()) return q.status();
    absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(path);
    if (!model.ok()) return model.status();
    absl::StatusOr<PerplexityPlan> plan = PlanPerplexity(**model, text, options.n_ctx);
    if (!plan.ok()) return plan.status();
    const ModelConfig& c = (*model)->config();
    if (wi == 0) {
      table.n_tokens = static_cast<int64_t>(plan->tokens.size());
      table.n_chunks = plan->n_chunks;
      table.scored = plan->scored();
      for (KvDtype d : options.kv_formats) {
        absl::StatusOr<size_t> row = KvRowBytes(d, c.kv_dim());
        if (!row.ok()) return row.status();
        table.kv_bytes_per_token.push_back(2ull * c.n_layers * *row);
      }
    }
    QualityRow qr;
    qr.weight_format = wf;
    qr.weight_summary = (*model)->WeightFormat();
    qr.weight_bytes = (*model)->weights().total_bytes();
    for (size_t ki = 0; ki < options.kv_formats.size(); ++ki) {
      const bool is_reference = wi == 0 && ki == 0;
      const int n_vocab = c.n_vocab;
      if (is_reference) reference.resize(static_cast<size_t>(plan->scored()) * n_vocab);
      KlAccumulator acc;
      PerplexityCallbacks cb;
      cb.on_log_probs = [&](int64_t index, const float* lp, int nv, int32_t) -> absl::Status {
        float* ref = reference.data() + static_cast<size_t>(index) * n_vocab;
        if (nv != n_vocab || static_cast<size_t>(index + 1) * n_vocab > reference.size()) {
          return absl::FailedPreconditionError(absl::StrCat(
              wf, " does not line up with the reference run (vocabulary or text differ)"));
        }
        if (is_reference) std::copy(lp, lp + nv, ref);
        acc.Add(ref, lp, nv);
        return absl::OkStatus();
      };
      PerplexityOptions po;
      po.n_ctx = options.n_ctx;
      po.kv_dtype = options.kv_formats[ki];
      po.threads = options.threads;
      absl::StatusOr<PerplexityResult> r = ComputePerplexity(**model, *plan, po, cb);
      if (!r.ok()) return r.status();
      QualityCell cell{*r, acc.Result()};
      log(absl::StrFormat("%s weights, %s KV: PPL %.4f, KL %.6f, top-1 %.2f%%", wf,
                          Sv(KvDtypeName(options.kv_formats[ki])), cell.ppl.ppl, cell.kl.mean_kl,
                          100 * cell.kl.top1_agreement));
      qr.cells.push_back(cell);
    }
    table.rows.push_back(std::move(qr));
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  table.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return table;
}

}  // namespace pinfer
