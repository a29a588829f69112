#include "cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_check.h"
#include "kvcache/kv_dtype.h"
#include "loaders/absl_compat.h"
#include "loaders/ggml_types.h"

namespace pinfer::cuda {
namespace {

static_assert(kWF32 == static_cast<int>(GgmlType::kF32) &&
                  kWF16 == static_cast<int>(GgmlType::kF16) &&
                  kWBF16 == static_cast<int>(GgmlType::kBF16) &&
                  kWQ4_0 == static_cast<int>(GgmlType::kQ4_0) &&
                  kWQ4_1 == static_cast<int>(GgmlType::kQ4_1) &&
                  kWQ5_0 == static_cast<int>(GgmlType::kQ5_0) &&
                  kWQ5_1 == static_cast<int>(GgmlType::kQ5_1) &&
                  kWQ8_0 == static_cast<int>(GgmlType::kQ8_0) &&
                  kWQ4_K == static_cast<int>(GgmlType::kQ4_K) &&
                  kWQ5_K == static_cast<int>(GgmlType::kQ5_K) &&
                  kWQ6_K == static_cast<int>(GgmlType::kQ6_K),
              "kernels.h weight ids must be GGUF's");
static_assert(kKF32 == static_cast<int>(KvDtype::kF32) &&
                  kKF16 == static_cast<int>(KvDtype::kF16) &&
                  kKBF16 == static_cast<int>(KvDtype::kBF16) &&
                  kKQ8_0 == static_cast<int>(KvDtype::kQ8_0) &&
                  kKQ4_0 == static_cast<int>(KvDtype::kQ4_0) &&
                  kKFp8 == static_cast<int>(KvDtype::kFp8E4M3),
              "kernels.h KV ids must follow KvDtype");

constexpr size_t kAlign = 256;
constexpr uint64_t kCublasWorkspaceBytes = 32ull << 20;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Lays out named byte ranges in one allocation.
class Carver {
 public:
  size_t Take(size_t bytes) {
    const size_t at = size_;
    size_ += AlignUp(std::max<size_t>(bytes, 1));
    return at;
  }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const Model& model, int max_tokens,
                                                                 int device) {
  if (max_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens ", max_tokens, " must be >= 1"));
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend(model, max_tokens));
  PINFER_RETURN_IF_ERROR(b->Init(device));
  return b;
}

CudaBackend::~CudaBackend() {
  if (stream_) cudaStreamSynchronize(stream_);
  matmul_.reset();
  if (cublas_) cublasDestroy(cublas_);
  cudaFree(cublas_workspace_);
  cudaFree(weights_);
  cudaFree(workspace_);
  cudaFree(d_tables_);
  if (stream_) cudaStreamDestroy(stream_);
}

absl::Status CudaBackend::Init(int device) {
  PINFER_RETURN_IF_ERROR(DeviceAvailable());
  const ModelConfig& c = model_.config();
  if (c.head_dim > 256 || c.head_dim % 2 != 0) {
    return absl::UnimplementedError(absl::StrCat(
        "the CUDA attention kernel takes an even head_dim up to 256, not ", c.head_dim));
  }
  PINFER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  PINFER_CUDA_RETURN_IF_ERROR(cudaFree(nullptr));  // creates the context
  cudaDeviceProp prop;
  PINFER_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  name_ = absl::StrCat("cuda:", device, " (", prop.name, ")");
  size_t free0 = 0, total = 0;
  PINFER_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free0, &total));
  detected_ = free0;  // after the context: its own memory is already gone
  PINFER_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream_));
  PINFER_CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_));
  PINFER_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_, stream_));
  PINFER_CUDA_RETURN_IF_ERROR(cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes));
  PINFER_CUBLAS_RETURN_IF_ERROR(
      cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes));
  PINFER_RETURN_IF_ERROR(UploadWeights());
  PINFER_RETURN_IF_ERROR(AllocateWorkspace());
  size_t free1 = 0;
  PINFER_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free1, &total));
  // Everything this backend took that is neither weights nor workspace: cuBLAS (handle and
  // workspace), allocation granularity, module loading.
  const uint64_t used = free0 > free1 ? free0 - free1 : 0;
  const uint64_t counted = weight_bytes_ + workspace_bytes_;
  reserve_ = used > counted ? used - counted : 0;
  return absl::OkStatus();
}

absl::Status CudaBackend::UploadWeights() {
  const ModelConfig& c = model_.config();
  const ModelWeights& w = model_.weights();
  Carver carve;
  struct Pending {
    size_t offset;
    const void* src;
    size_t bytes;
  };
  std::vector<Pending> copies;
  std::map<const uint8_t*, size_t> matrix_at;  // tied matrices are uploaded once
  auto matrix = [&](const WeightMatrix& m, DeviceMatrix* d) -> absl::Status {
    const int type = static_cast<int>(m.type);
    if (!WeightTypeSupported(type)) {
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
    d->type = type;
    d->rows = m.rows;
    d->cols = m.cols;
    d->row_bytes = m.row_bytes;
    auto it = matrix_at.find(m.data);
    size_t at;
    if (it != matrix_at.end()) {
      at = it->second;
    } else {
      at = carve.Take(m.bytes());
      matrix_at[m.data] = at;
      copies.push_back({at, m.data, m.bytes()});
    }
    d->data = reinterpret_cast<const uint8_t*>(at);  // offset until the pool exists
    return absl::OkStatus();
  };
  auto vec = [&](const std::vector<float>& v, const float** d) {
    if (v.empty()) {
      *d = nullptr;
      return;
    }
    const size_t at = carve.Take(v.size() * sizeof(float));
    copies.push_back({at, v.data(), v.size() * sizeof(float)});
    *d = reinterpret_cast<const float*>(at + 1);  // +1: tells "absent" (nullptr) from offset 0
  };
  PINFER_RETURN_IF_ERROR(matrix(w.tok_embd, &tok_embd_));
  PINFER_RETURN_IF_ERROR(matrix(w.output, &output_));
  vec(w.output_norm, &output_norm_);
  layers_.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    Layer& d = layers_[static_cast<size_t>(l)];
    PINFER_RETURN_IF_ERROR(matrix(L.wq, &d.wq));
    PINFER_RETURN_IF_ERROR(matrix(L.wk, &d.wk));
    PINFER_RETURN_IF_ERROR(matrix(L.wv, &d.wv));
    PINFER_RETURN_IF_ERROR(matrix(L.wo, &d.wo));
    PINFER_RETURN_IF_ERROR(matrix(L.w_gate, &d.w_gate));
    PINFER_RETURN_IF_ERROR(matrix(L.w_up, &d.w_up));
    PINFER_RETURN_IF_ERROR(matrix(L.w_down, &d.w_down));
    vec(L.attn_norm, &d.attn_norm);
    vec(L.ffn_norm, &d.ffn_norm);
    vec(L.bq, &d.bq);
    vec(L.bk, &d.bk);
    vec(L.bv, &d.bv);
  }
  weight_bytes_ = carve.size();
  void* pool = nullptr;
  const cudaError_t err = cudaMalloc(&pool, carve.size());
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat(
        "could not allocate ", carve.size(), " bytes of device memory for the weights: ",
        cudaGetErrorString(err), "; the model does not fit this GPU, use --device cpu"));
  }
  weights_ = static_cast<uint8_t*>(pool);
  for (const Pending& p : copies) {
    PINFER_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(weights_ + p.offset, p.src, p.bytes, cudaMemcpyHostToDevice));
  }
  // Offsets become device pointers.
  auto fix_m = [&](DeviceMatrix& d) { d.data = weights_ + reinterpret_cast<size_t>(d.data); };
  auto fix_v = [&](const float*& d) {
    if (d) d = reinterpret_cast<const float*>(weights_ + reinterpret_cast<size_t>(d) - 1);
  };
  fix_m(tok_embd_);
  fix_m(output_);
  fix_v(output_norm_);
  for (Layer& d : layers_) {
    for (DeviceMatrix* m : {&d.wq, &d.wk, &d.wv, &d.wo, &d.w_gate, &d.w_up, &d.w_down}) fix_m(*m);
    for (const float** v : {&d.attn_norm, &d.ffn_norm, &d.bq, &d.bk, &d.bv}) fix_v(*v);
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::AllocateWorkspace() {
  const ModelConfig& c = model_.config();
  const size_t t = static_cast<size_t>(max_tokens_), f = sizeof(float);
  Carver carve;
  const size_t x = carve.Take(t * c.dim * f), xb = carve.Take(t * c.dim * f);
  const size_t q = carve.Take(t * c.q_dim() * f), att = carve.Take(t * c.q_dim() * f);
  const size_t k = carve.Take(t * c.kv_dim() * f), v = carve.Take(t * c.kv_dim() * f);
  const size_t proj = carve.Take(t * c.dim * f);
  const size_t gate = carve.Take(t * c.n_ff * f), up = carve.Take(t * c.n_ff * f);
  const size_t logits = carve.Take(t * c.n_vocab * f);
  const size_t tokens = carve.Take(t * 4), positions = carve.Take(t * 4);
  const size_t table_start = carve.Take(t * 4), logit_rows = carve.Take(t * 4);
  const size_t slot = carve.Take(t * 8);
  void* p = nullptr;
  PINFER_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, carve.size()));
  workspace_ = static_cast<uint8_t*>(p);
  auto F = [&](size_t at) { return reinterpret_cast<float*>(workspace_ + at); };
  auto I = [&](size_t at) { return reinterpret_cast<int32_t*>(workspace_ + at); };
  x_ = F(x), xb_ = F(xb), q_ = F(q), att_ = F(att), k_ = F(k), v_ = F(v), proj_ = F(proj);
  gate_ = F(gate), up_ = F(up), logits_ = F(logits);
  d_tokens_ = I(tokens), d_positions_ = I(positions), d_table_start_ = I(table_start);
  d_logit_rows_ = I(logit_rows);
  d_slot_offset_ = reinterpret_cast<int64_t*>(workspace_ + slot);
  const int64_t max_cols = std::max({c.dim, c.q_dim(), c.n_ff});
  auto mm = DeviceMatMul::Create(cublas_, max_tokens_, max_cols);
  if (!mm.ok()) return mm.status();
  matmul_ = std::move(*mm);
  workspace_bytes_ = carve.size() + matmul_->scratch_bytes();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KvStorage>> CudaBackend::MakeKvStorage(size_t block_bytes,
                                                                      int64_t num_blocks) {
  auto s = DeviceKvStorage::Create(block_bytes, num_blocks);
  if (!s.ok()) return s.status();
  kv_storage_ = s->get();
  kv_storage_->SetOnDestroy(&kv_storage_);
  return std::unique_ptr<KvStorage>(std::move(*s));
}

absl::Status CudaBackend::UploadStep(const ForwardBatch& batch, const KvCache& cache) {
  const ModelConfig& c = model_.config();
  const int n = batch.size();
  const int bs = cache.block_size();
  h_slot_offset_.resize(static_cast<size_t>(n));
  h_table_start_.resize(static_cast<size_t>(n));
  h_tables_.clear();
  std::map<SeqId, int32_t> start_of;
  for (int t = 0; t < n; ++t) {
    const int32_t tok = batch.tokens[t];
    if (tok < 0 || tok >= c.n_vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", tok, " is outside the vocabulary of ", c.n_vocab));
    }
    const SeqId seq = batch.seq_ids[t];
    const int pos = batch.positions[t];
    if (pos < 0 || pos >= cache.num_tokens(seq)) {
      return absl::FailedPreconditionError(
          absl::StrCat("sequence ", seq, " has no KV slot for position ", pos));
    }
    const std::span<const int32_t> table = cache.BlockTable(seq);
    if (static_cast<size_t>(pos / bs) >= table.size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("sequence ", seq, "'s block table does not reach position ", pos));
    }
    auto [it, added] = start_of.try_emplace(seq, static_cast<int32_t>(h_tables_.size()));
    if (added) h_tables_.insert(h_tables_.end(), table.begin(), table.end());
    h_table_start_[static_cast<size_t>(t)] = it->second;
    h_slot_offset_[static_cast<size_t>(t)] =
        static_cast<int64_t>(table[static_cast<size_t>(pos / bs)]) *
            static_cast<int64_t>(cache.block_bytes()) +
        static_cast<int64_t>(pos % bs) * static_cast<int64_t>(cache.row_bytes());
  }
  if (h_tables_.size() > tables_capacity_) {
    cudaFree(d_tables_);
    d_tables_ = nullptr;
    tables_capacity_ = std::max(h_tables_.size(), 2 * tables_capacity_);
    PINFER_CUDA_RETURN_IF_ERROR(
        cudaMalloc(reinterpret_cast<void**>(&d_tables_), tables_capacity_ * sizeof(int32_t)));
  }
  const size_t n4 = static_cast<size_t>(n) * 4;
  PINFER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(d_tokens_, batch.tokens.data(), n4, cudaMemcpyHostToDevice, stream_));
  PINFER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(d_positions_, batch.positions.data(), n4, cudaMemcpyHostToDevice, stream_));
  PINFER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(d_table_start_, h_table_start_.data(), n4, cudaMemcpyHostToDevice, stream_));
  PINFER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_slot_offset_, h_slot_offset_.data(), 2 * n4,
                                              cudaMemcpyHostToDevice, stream_));
  PINFER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_tables_, h_tables_.data(),
                                              h_tables_.size() * sizeof(int32_t),
                                              cudaMemcpyHostToDevice, stream_));
  if (!batch.logit_rows.empty()) {
    PINFER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_logit_rows_, batch.logit_rows.data(),
                                                batch.logit_rows.size() * 4, cudaMemcpyHostToDevice,
                                                stream_));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Forward(const ForwardBatch& batch, KvCache& cache, float* logits) {
  const int n = batch.size();
  if (n == 0) return absl::OkStatus();
  if (n > max_tokens_) {
    return absl::InvalidArgumentError(absl::StrCat("a step of ", n, " tokens exceeds the ",
                                                   max_tokens_, " this backend was sized for"));
  }
  if (kv_storage_ == nullptr || kv_storage_->block_bytes() != cache.block_bytes() ||
      kv_storage_->num_blocks() != cache.num_blocks()) {
    return absl::FailedPreconditionError(
        "the KV cache must use the device storage from this backend's MakeKvStorage");
  }
  PINFER_RETURN_IF_ERROR(kv_storage_->status());
  const absl::Status s = Run(batch, cache, logits);
  // Wait even after a failed launch, so that the step's host buffers outlive the copies.
  const cudaError_t sync = cudaStreamSynchronize(stream_);
  if (!s.ok()) return s;
  PINFER_CUDA_RETURN_IF_ERROR(sync);
  return absl::OkStatus();
}

absl::Status CudaBackend::Run(const ForwardBatch& batch, KvCache& cache, float* logits) {
  const ModelConfig& c = model_.config();
  const int n = batch.size();
  PINFER_RETURN_IF_ERROR(UploadStep(batch, cache));
  cudaStream_t s = stream_;
  const bool halves = c.rope_style == RopeStyle::kHalves;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  KvLayerView kv;
  kv.dtype = static_cast<int>(cache.config().dtype);
  kv.base = kv_storage_->device_base();
  kv.block_bytes = cache.block_bytes();
  kv.row_bytes = cache.row_bytes();
  kv.block_size = cache.block_size();
  kv.v_offset = static_cast<size_t>(kv.block_size) * kv.row_bytes;
  kv.kv_dim = c.kv_dim();
  const int64_t nd = static_cast<int64_t>(n) * c.dim;
  PINFER_CUDA_RETURN_IF_ERROR(LaunchEmbedding(tok_embd_, d_tokens_, n, x_, s));
  for (int l = 0; l < c.n_layers; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    kv.layer_offset = static_cast<size_t>(l) * 2 * kv.v_offset;
    PINFER_CUDA_RETURN_IF_ERROR(
        LaunchRmsNorm(x_, nullptr, L.attn_norm, n, c.dim, c.rms_eps, xb_, s));
    PINFER_RETURN_IF_ERROR(matmul_->Run(L.wq, xb_, n, q_, s));
    PINFER_RETURN_IF_ERROR(matmul_->Run(L.wk, xb_, n, k_, s));
    PINFER_RETURN_IF_ERROR(matmul_->Run(L.wv, xb_, n, v_, s));
    if (c.qkv_bias) {
      PINFER_CUDA_RETURN_IF_ERROR(LaunchAddBias(q_, L.bq, n, c.q_dim(), s));
      PINFER_CUDA_RETURN_IF_ERROR(LaunchAddBias(k_, L.bk, n, c.kv_dim(), s));
      PINFER_CUDA_RETURN_IF_ERROR(LaunchAddBias(v_, L.bv, n, c.kv_dim(), s));
    }
    PINFER_CUDA_RETURN_IF_ERROR(
        LaunchRope(q_, n, c.n_heads, c.head_dim, d_positions_, c.rope_theta, halves, s));
    PINFER_CUDA_RETURN_IF_ERROR(
        LaunchRope(k_, n, c.n_kv_heads, c.head_dim, d_positions_, c.rope_theta, halves, s));
    PINFER_CUDA_RETURN_IF_ERROR(LaunchKvWrite(kv, k_, v_, n, d_slot_offset_, s));
    PINFER_CUDA_RETURN_IF_ERROR(LaunchAttention(kv, q_, n, c.n_heads, c.n_kv_heads, c.head_dim,
                                                scale, d_tables_, d_table_start_, d_positions_,
                                                att_, s));
    PINFER_RETURN_IF_ERROR(matmul_->Run(L.wo, att_, n, proj_, s));
    PINFER_CUDA_RETURN_IF_ERROR(LaunchAdd(x_, proj_, nd, s));
    PINFER_CUDA_RETURN_IF_ERROR(
        LaunchRmsNorm(x_, nullptr, L.ffn_norm, n, c.dim, c.rms_eps, xb_, s));
    PINFER_RETURN_IF_ERROR(matmul_->Run(L.w_gate, xb_, n, gate_, s));
    PINFER_RETURN_IF_ERROR(matmul_->Run(L.w_up, xb_, n, up_, s));
    PINFER_CUDA_RETURN_IF_ERROR(LaunchSwiGlu(gate_, up_, static_cast<int64_t>(n) * c.n_ff, s));
    PINFER_RETURN_IF_ERROR(matmul_->Run(L.w_down, gate_, n, proj_, s));
    PINFER_CUDA_RETURN_IF_ERROR(LaunchAdd(x_, proj_, nd, s));
  }
  const int n_out = static_cast<int>(batch.logit_rows.size());
  if (n_out == 0) return absl::OkStatus();
  PINFER_CUDA_RETURN_IF_ERROR(
      LaunchRmsNorm(x_, d_logit_rows_, output_norm_, n_out, c.dim, c.rms_eps, xb_, s));
  PINFER_RETURN_IF_ERROR(matmul_->Run(output_, xb_, n_out, logits_, s));
  PINFER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(logits, logits_, static_cast<size_t>(n_out) * c.n_vocab * sizeof(float),
                      cudaMemcpyDeviceToHost, s));
  return absl::OkStatus();
}

}  // namespace pinfer::cuda
