#include "engine/model/model.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loaders/absl_compat.h"
#include "loaders/gguf.h"
#include "loaders/safetensors.h"

namespace pinfer {

Model::~Model() = default;

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return FromHfFolder(path);
  auto file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  return FromGguf(std::move(*file));
}

absl::StatusOr<std::unique_ptr<Model>> Model::FromGguf(std::unique_ptr<GgufFile> file) {
  std::unique_ptr<Model> m(new Model());
  m->path_ = file->path();
  auto config = ModelConfigFromGguf(*file);
  if (!config.ok()) return config.status();
  m->config_ = *config;
  auto tok = Tokenizer::FromGguf(*file);
  if (!tok.ok()) return tok.status();
  m->tokenizer_ = std::move(*tok);
  if (m->tokenizer_->n_vocab() != m->config_.n_vocab) {
    return absl::InvalidArgumentError(absl::StrCat("the tokenizer has ", m->tokenizer_->n_vocab(),
                                                   " tokens but token_embd.weight has ",
                                                   m->config_.n_vocab, " rows"));
  }
  auto weights = WeightsFromGguf(*file, m->config_);
  if (!weights.ok()) return weights.status();
  m->weights_ = std::move(*weights);
  for (const GgufTensorInfo& t : file->tensors()) {
    m->stored_.push_back(StoredTensor{t.name, t.type, t.n_elements(), t.nbytes});
  }
  m->source_format_ = "gguf";
  m->gguf_ = std::move(file);
  return m;
}

bool Model::OwnsMatrix(const WeightMatrix& m) const {
  bool owned = false;
  for (const std::vector<uint8_t>& buf : owned_) {
    owned |= m.data >= buf.data() && m.data < buf.data() + buf.size();
  }
  return owned;
}

std::vector<Model::WeightRange> Model::WeightRanges(
    const std::vector<const WeightMatrix*>& excluded) const {
  std::vector<WeightRange> spans;
  auto add = [&](const WeightMatrix& m) {
    if (m.data == nullptr || m.bytes() == 0) return;
    if (std::find(excluded.begin(), excluded.end(), &m) != excluded.end()) return;
    spans.push_back(WeightRange{m.data, static_cast<size_t>(m.bytes()), !OwnsMatrix(m)});
  };
  add(weights_.tok_embd);
  add(weights_.output);
  for (const LayerWeights& l : weights_.layers) {
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      add(*m);
    }
  }
  std::sort(spans.begin(), spans.end(),
            [](const WeightRange& a, const WeightRange& b) { return a.data < b.data; });
  std::vector<WeightRange> merged;
  for (const WeightRange& r : spans) {
    if (!merged.empty() && merged.back().mapped == r.mapped &&
        r.data < merged.back().data + merged.back().bytes + kWeightRangeGap) {
      WeightRange& m = merged.back();
      m.bytes = std::max(m.bytes, static_cast<size_t>(r.data + r.bytes - m.data));
      continue;
    }
    merged.push_back(r);
  }
  return merged;
}

std::string Model::WeightFormat() const {
  std::vector<std::pair<uint64_t, GgmlType>> by_size;
  for (const auto& [type, bytes] : weights_.bytes_by_type) by_size.push_back({bytes, type});
  std::sort(by_size.rbegin(), by_size.rend());
  std::string out;
  for (const auto& [bytes, type] : by_size) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", Sv(GgmlTypeInfoOf(type).name), " ",
                    absl::StrFormat("%.1f MiB", bytes / 1048576.0));
  }
  return out;
}

}  // namespace pinfer
