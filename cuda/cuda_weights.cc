// CudaBackend::UploadWeights: every matrix, norm vector and RoPE table of the model in one
// device allocation, in three steps: plan (offsets and host sources, each tied matrix once),
// upload (one cudaMalloc, then the copies), relocate (offsets become device pointers).
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/carver.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "engine/cpu/ops.h"
#include "loaders/absl_compat.h"
#include "loaders/ggml_types.h"

namespace pinfer::cuda {
namespace {

// Where each tensor goes in the allocation. Until Upload, a DeviceMatrix's data holds its
// offset, and perm and vector pointers hold offset + 1 (so that offset 0 differs from
// "absent", nullptr).
class WeightPlan {
 public:
  absl::Status Matrix(const WeightMatrix& m, DeviceMatrix* d) {
    PINFER_RETURN_IF_ERROR(CheckSupported(m));
    d->type = static_cast<int>(m.type);
    d->rows = m.rows;
    d->cols = m.cols;
    d->row_bytes = m.row_bytes;
    d->perm = nullptr;
    if (!m.input_perm.empty()) {
      const size_t bytes = m.input_perm.size() * sizeof(int32_t);
      const size_t at = carve_.Take(bytes);
      copies_.push_back({at, m.input_perm.data(), bytes});
      d->perm = reinterpret_cast<const int32_t*>(at + 1);
      permuted_ = true;
    }
    auto it = matrix_at_.find(m.data);
    if (it == matrix_at_.end()) {
      it = matrix_at_.emplace(m.data, carve_.Take(m.bytes())).first;
      copies_.push_back({it->second, m.data, m.bytes()});
    }
    d->data = reinterpret_cast<const uint8_t*>(it->second);
    return absl::OkStatus();
  }

  // v (nullptr when empty); v must live until Upload.
  void Vector(const std::vector<float>& v, const float** d) {
    if (v.empty()) {
      *d = nullptr;
      return;
    }
    const size_t at = carve_.Take(v.size() * sizeof(float));
    copies_.push_back({at, v.data(), v.size() * sizeof(float)});
    *d = reinterpret_cast<const float*>(at + 1);
  }

  size_t bytes() const { return carve_.size(); }
  bool permuted() const { return permuted_; }

  // One device allocation of bytes(), every tensor copied in; *base owns it on success.
  absl::Status Upload(uint8_t** base) const {
    void* pool = nullptr;
    const cudaError_t err = cudaMalloc(&pool, carve_.size());
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(
          "could not allocate ", carve_.size(), " bytes of device memory for the weights: ",
          cudaGetErrorString(err), "; the model does not fit this GPU, use --device cpu"));
    }
    *base = static_cast<uint8_t*>(pool);
    for (const Copy& c : copies_) {
      PINFER_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(*base + c.offset, c.src, c.bytes, cudaMemcpyHostToDevice));
    }
    return absl::OkStatus();
  }

 private:
  struct Copy {
    size_t offset;
    const void* src;
    size_t bytes;
  };

  static absl::Status CheckSupported(const WeightMatrix& m) {
    if (!WeightTypeSupported(static_cast<int>(m.type))) {
      return absl::UnimplementedError(
          absl::StrCat("tensor ", m.name, " has storage type ", Sv(GgmlTypeInfoOf(m.type).name),
                       ", which the CUDA backend does not multiply; use --device cpu"));
    }
    const bool flt =
        m.type == GgmlType::kF32 || m.type == GgmlType::kF16 || m.type == GgmlType::kBF16;
    if (!flt && m.cols % 8 != 0) {
      return absl::UnimplementedError(
          absl::StrCat("tensor ", m.name, " has ", m.cols, " columns, not a multiple of 8"));
    }
    if (!m.input_perm.empty() && static_cast<int64_t>(m.input_perm.size()) != m.cols) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", m.name, " has a permutation of ",
                                                     m.input_perm.size(), " columns, not ",
                                                     m.cols));
    }
    return absl::OkStatus();
  }

  Carver carve_;
  std::vector<Copy> copies_;
  std::map<const uint8_t*, size_t> matrix_at_;  // tied matrices are uploaded once
  bool permuted_ = false;
};

// Offsets (WeightPlan's) -> pointers into the allocation at base.
void Relocate(uint8_t* base, DeviceMatrix* d) {
  d->data = base + reinterpret_cast<size_t>(d->data);
  if (d->perm) {
    d->perm = reinterpret_cast<const int32_t*>(base + reinterpret_cast<size_t>(d->perm) - 1);
  }
}
void Relocate(uint8_t* base, const float** v) {
  if (*v) *v = reinterpret_cast<const float*>(base + reinterpret_cast<size_t>(*v) - 1);
}

}  // namespace

absl::Status CudaBackend::UploadWeights() {
  const ModelConfig& c = model_.config();
  const ModelWeights& w = model_.weights();
  WeightPlan plan;
  PINFER_RETURN_IF_ERROR(plan.Matrix(w.tok_embd, &tok_embd_));
  PINFER_RETURN_IF_ERROR(plan.Matrix(w.output, &output_));
  plan.Vector(w.output_norm, &output_norm_);
  plan.Vector(c.rope_freq_factors, &rope_freq_factors_);
  const std::vector<float> rope_freqs = RopeFrequencies(c.rope_theta, c.head_dim);
  plan.Vector(rope_freqs, &rope_freqs_);
  layers_.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    Layer& d = layers_[static_cast<size_t>(l)];
    for (auto [m, dm] : {std::pair{&L.wq, &d.wq}, std::pair{&L.wk, &d.wk}, std::pair{&L.wv, &d.wv},
                         std::pair{&L.wo, &d.wo}, std::pair{&L.w_gate, &d.w_gate},
                         std::pair{&L.w_up, &d.w_up}, std::pair{&L.w_down, &d.w_down}}) {
      PINFER_RETURN_IF_ERROR(plan.Matrix(*m, dm));
    }
    for (auto [v, dv] : {std::pair{&L.attn_norm, &d.attn_norm}, std::pair{&L.ffn_norm, &d.ffn_norm},
                         std::pair{&L.bq, &d.bq}, std::pair{&L.bk, &d.bk}, std::pair{&L.bv, &d.bv},
                         std::pair{&L.q_norm, &d.q_norm}, std::pair{&L.k_norm, &d.k_norm}}) {
      plan.Vector(*v, dv);
    }
  }
  permuted_inputs_ = plan.permuted();
  weight_bytes_ = plan.bytes();
  PINFER_RETURN_IF_ERROR(plan.Upload(&weights_));
  Relocate(weights_, &tok_embd_);
  Relocate(weights_, &output_);
  for (const float** v : {&output_norm_, &rope_freq_factors_, &rope_freqs_}) Relocate(weights_, v);
  for (Layer& d : layers_) {
    for (DeviceMatrix* m : {&d.wq, &d.wk, &d.wv, &d.wo, &d.w_gate, &d.w_up, &d.w_down}) {
      Relocate(weights_, m);
    }
    for (const float** v : {&d.attn_norm, &d.ffn_norm, &d.bq, &d.bk, &d.bv, &d.q_norm, &d.k_norm}) {
      Relocate(weights_, v);
    }
  }
  return absl::OkStatus();
}

}  // namespace pinfer::cuda
