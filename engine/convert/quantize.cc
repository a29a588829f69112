// QuantizeGguf: PlanTensors' storage types applied to the tensors of an existing float file,
// written through GgufWriter's Fill callbacks so only one tensor is in memory at a time.
#include "engine/convert/quantize.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/model_config.h"
#include "engine/model/model_shapes.h"
#include "loaders/absl_compat.h"
#include "loaders/gguf.h"
#include "loaders/quants.h"

namespace pinfer {
namespace {

bool IsFloatSource(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16;
}

std::string Dims(const std::vector<int64_t>& d) { return absl::StrJoin(d, " x "); }

// Converts every row of `src` (type `from`) into `dst` (type `to`), rows split over the pool.
void ConvertRows(GgmlType from, const uint8_t* src, GgmlType to, uint8_t* dst, int64_t row_len,
                 int64_t rows, ThreadPool* pool) {
  const size_t in_row = GgmlRowBytes(from, row_len), out_row = GgmlRowBytes(to, row_len);
  pool->ParallelFor(rows, [&](int64_t begin, int64_t end, int) {
    std::vector<float> buf(static_cast<size_t>(row_len));
    for (int64_t r = begin; r < end; ++r) {
      DequantizeRow(from, src + static_cast<size_t>(r) * in_row, buf.data(), row_len);
      QuantizeRow(to, buf.data(), dst + static_cast<size_t>(r) * out_row, row_len);
    }
  });
}

}  // namespace

absl::StatusOr<QuantizeSummary> QuantizeGguf(const std::string& in_path,
                                             const std::string& out_path,
                                             std::string_view file_type,
                                             const QuantizeOptions& options) {
  absl::StatusOr<FileType> ft = ParseFileType(file_type);
  if (!ft.ok()) return ft.status();
  absl::StatusOr<std::unique_ptr<GgufFile>> in = GgufFile::Open(in_path);
  if (!in.ok()) return in.status();
  const GgufFile& file = **in;
  absl::StatusOr<ModelConfig> config = ModelConfigFromGguf(file);
  if (!config.ok()) return config.status();

  // What the plan wants for each tensor of a model of this shape.
  const std::vector<TensorPlan> plan = PlanTensors(*config, *ft);
  auto planned = [&](const std::string& name) -> const TensorPlan* {
    for (const TensorPlan& t : plan)
      if (t.name == name) return &t;
    return nullptr;
  };

  GgufWriter w;
  for (const GgufKV& kv : file.metadata()) w.Set(kv.key, kv.value);
  w.SetU32("general.file_type", LlamaFileTypeId(*ft));

  auto pool = std::make_shared<ThreadPool>(options.threads);
  QuantizeSummary sum;
  for (const GgufTensorInfo& t : file.tensors()) {
    if (!IsFloatSource(t.type)) {
      return absl::FailedPreconditionError(absl::StrCat(
          in_path, ": tensor ", t.name, " is already ", Sv(GgmlTypeInfoOf(t.type).name),
          "; quantize from the F32, F16 or BF16 original (requantizing loses accuracy twice)"));
    }
    const TensorPlan* p = planned(t.name);
    GgmlType to = t.type;
    std::string why;
    if (p == nullptr) {
      why = absl::StrCat("not a weight the model's shape plans; copied unchanged as ",
                         Sv(GgmlTypeInfoOf(t.type).name));
    } else if (p->dims != t.dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          in_path, ": tensor ", t.name, " is ", Dims(t.dims), " but the file's metadata implies ",
          Dims(p->dims), "; the file is inconsistent, re-convert it from the original model"));
    } else {
      to = p->type;
      why = p->fallback_note;
    }
    if (!why.empty()) {
      ++sum.fallbacks;
      if (options.note) options.note(absl::StrCat(t.name, ": ", why));
    }
    const int64_t row_len = t.dims.empty() ? 1 : t.dims[0];
    const int64_t rows = t.n_rows();
    const GgmlType from = t.type;
    const uint8_t* src = file.data(t);
    TensorProgressInfo info{sum.tensors + 1,
                            static_cast<int>(file.tensors().size()),
                            t.name,
                            t.dims,
                            std::string(GgmlTypeInfoOf(from).name),
                            to,
                            static_cast<uint64_t>(GgmlRowBytes(to, row_len)) * rows};
    GgufWriter::Fill fill = [from, src, to, row_len, rows, pool, info, progress = options.progress](
                                uint8_t* dst, size_t) {
      ConvertRows(from, src, to, dst, row_len, rows, pool.get());
      if (progress) progress(info);
    };
    if (absl::Status s = w.AddTensor(t.name, to, t.dims, std::move(fill)); !s.ok()) return s;
    ++sum.tensors;
    ++sum.tensors_by_type[to];
    sum.in_bytes += t.nbytes;
    sum.out_bytes += static_cast<uint64_t>(GgmlRowBytes(to, row_len)) * rows;
  }
  if (absl::Status s = w.WriteFile(out_path); !s.ok()) return s;
  return sum;
}

}  // namespace pinfer
