// Writes synthetic models through GgufWriter, generating and quantizing rows in parallel.
#include "engine/synth/synth.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/synth/synth_data.h"
#include "loaders/absl_compat.h"
#include "loaders/fp16.h"
#include "loaders/quants.h"

namespace pinfer {
namespace {

// Fills rows [begin, end) of tensor `index` into dst (the tensor's whole data).
void FillRows(const TensorPlan& t, uint64_t index, uint64_t seed, bool varied_norms, int64_t begin,
              int64_t end, uint8_t* dst) {
  const int64_t n = t.dims[0];
  const size_t row_bytes = GgmlRowBytes(t.type, n);
  const SynthInit init = SynthInitFor(t, varied_norms);
  std::vector<float> buf(static_cast<size_t>(n));
  for (int64_t r = begin; r < end; ++r) {
    SynthRow(seed, index, r, init.mean, init.stddev, buf.data(), n);
    uint8_t* out = dst + static_cast<size_t>(r) * row_bytes;
    switch (t.type) {
      case GgmlType::kF32:
        std::memcpy(out, buf.data(), row_bytes);
        break;
      case GgmlType::kF16:
      case GgmlType::kBF16:
        for (int64_t i = 0; i < n; ++i) {
          const uint16_t h = t.type == GgmlType::kF16 ? Fp32ToFp16(buf[i]) : Fp32ToBf16(buf[i]);
          std::memcpy(out + 2 * i, &h, 2);
        }
        break;
      default:
        QuantizeRow(t.type, buf.data(), out, n);
        break;
    }
  }
}

void FillTensor(const TensorPlan& t, uint64_t index, uint64_t seed, bool varied_norms, int threads,
                uint8_t* dst, size_t nbytes) {
  int64_t rows = 1;
  for (size_t i = 1; i < t.dims.size(); ++i) rows *= t.dims[i];
  if (nbytes != GgmlRowBytes(t.type, t.dims[0]) * static_cast<size_t>(rows)) {
    std::memset(dst, 0, nbytes);  // the writer checked sizes when the tensor was added
    return;
  }
  // Small tensors on one thread; large ones split into equal row ranges.
  const int64_t values = rows * t.dims[0];
  const int workers = static_cast<int>(std::clamp<int64_t>(
      std::min<int64_t>(threads, values / (1 << 16)), 1, std::max<int64_t>(rows, 1)));
  std::vector<std::thread> pool;
  for (int w = 1; w < workers; ++w) {
    pool.emplace_back(FillRows, std::cref(t), index, seed, varied_norms, rows * w / workers,
                      rows * (w + 1) / workers, dst);
  }
  FillRows(t, index, seed, varied_norms, 0, rows / workers, dst);
  for (std::thread& th : pool) th.join();
}

}  // namespace

absl::Status AddSynthModel(const ModelConfig& c, const FileType& ft, const SynthOptions& options,
                           GgufWriter* w) {
  absl::StatusOr<TokenizerSpec> vocab = SynthVocabulary(c.n_vocab, c.arch);
  if (!vocab.ok()) return vocab.status();
  const std::string& a = c.arch;
  w->SetString("general.architecture", a);
  w->SetString("general.name", c.name.empty() ? "synthetic" : c.name);
  w->SetString("general.description",
               absl::StrCat("synthetic model: seeded random weights (seed ", options.seed,
                            "), not trained; written by pagedinfer synth"));
  w->SetU32("general.file_type", LlamaFileTypeId(ft));
  SetHyperParameters(c, w);
  w->SetString("tokenizer.ggml.model", "llama");
  w->SetStringArray("tokenizer.ggml.tokens", vocab->tokens);
  w->SetF32Array("tokenizer.ggml.scores", vocab->scores);
  std::vector<int32_t> types;
  for (TokenType t : vocab->types) types.push_back(static_cast<int32_t>(t));
  w->SetI32Array("tokenizer.ggml.token_type", types);
  w->SetU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(vocab->bos_id));
  w->SetU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(vocab->eos_id));
  w->SetU32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(vocab->unk_id));
  w->SetBool("tokenizer.ggml.add_bos_token", true);
  w->SetBool("tokenizer.ggml.add_eos_token", false);

  const int threads = options.threads > 0
                          ? options.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<TensorPlan> plan = PlanTensors(c, ft);
  // The llama and qwen2 shapes keep norms of 1 (their files stay as they were); the other
  // architectures and the tiny-* shapes vary them (extra norms are what those test). Decided
  // by name, not by the window, so that a tiny-* shape with its window removed (a test's)
  // holds the same weights.
  const bool varied = (c.arch != "llama" && c.arch != "qwen2") || c.name.rfind("tiny-", 0) == 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const TensorPlan& t = plan[i];
    GgufWriter::Fill fill = [t, i, seed = options.seed, varied, threads](uint8_t* dst,
                                                                         size_t nbytes) {
      FillTensor(t, i, seed, varied, threads, dst, nbytes);
    };
    if (absl::Status s = w->AddTensor(t.name, t.type, t.dims, std::move(fill)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status WriteSynthModel(std::string_view shape, std::string_view file_type,
                             const std::string& path, const SynthOptions& options) {
  absl::StatusOr<ModelConfig> config = NamedShape(shape);
  if (!config.ok()) return config.status();
  if (options.n_layers < 0 || options.n_layers > config->n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("shape ", Sv(shape), " has ", config->n_layers,
                                                   " layers; cannot keep ", options.n_layers));
  }
  if (options.n_layers > 0) config->n_layers = options.n_layers;
  absl::StatusOr<FileType> ft = ParseFileType(file_type);
  if (!ft.ok()) return ft.status();
  GgufWriter w;
  if (absl::Status s = AddSynthModel(*config, *ft, options, &w); !s.ok()) return s;
  return w.WriteFile(path);
}

}  // namespace pinfer
