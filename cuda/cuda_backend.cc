#include "cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cuda/carver.h"
#include "cuda/cuda_check.h"
#include "cuda/model_support.h"
#include "kvcache/kv_dtype.h"
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

constexpr uint64_t kCublasWorkspaceBytes = 32ull << 20;

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
  DropGraphs();
  matmul_.reset();
  if (cublas_) cublasDestroy(cublas_);
  cudaFree(cublas_workspace_);
  cudaFree(weights_);
  cudaFree(workspace_);
  cudaFree(logits_);
  cudaFree(d_tables_);
  cudaFreeHost(h_tables_);
  cudaFreeHost(h_meta_);
  if (stream_) cudaStreamDestroy(stream_);
}

absl::Status CudaBackend::Init(int device) {
  if (const std::string missing = UnsupportedOnCuda(model_.config()); !missing.empty()) {
    return absl::UnimplementedError(
        absl::StrCat("the CUDA backend does not run ", model_.config().arch,
                     " models yet (not implemented: ", missing, "); use --device cpu"));
  }
  PINFER_RETURN_IF_ERROR(DeviceAvailable());
  const char* sync_env = std::getenv("PINFER_CUDA_SYNC");
  debug_sync_ = sync_env != nullptr && std::string(sync_env) == "1";
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
  attn_splits_ = AttentionMaxSplits(c.n_heads, prop.multiProcessorCount);
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
  const uint64_t counted = weight_bytes_ + WorkspaceBytes();
  reserve_ = used > counted ? used - counted : 0;
  return absl::OkStatus();
}

absl::Status CudaBackend::AllocateWorkspace() {
  const ModelConfig& c = model_.config();
  const size_t t = static_cast<size_t>(max_tokens_), f = sizeof(float);
  Carver carve;
  const size_t x = carve.Take(t * c.dim * f), xb = carve.Take(t * c.dim * f);
  const size_t q = carve.Take(t * c.q_dim() * f), att = carve.Take(t * c.q_dim() * f);
  const size_t k = carve.Take(t * c.kv_dim() * f), v = carve.Take(t * c.kv_dim() * f);
  const size_t gate = carve.Take(t * c.n_ff * f), up = carve.Take(t * c.n_ff * f);
  // Split attention's partial results for decode-sized steps (attn_splits_ per head).
  const size_t attn_bytes = AttentionSplitFloats(std::min(max_tokens_, kMaxGemvTokens), c.n_heads,
                                                 c.head_dim, attn_splits_) *
                            f;
  const size_t attn = carve.Take(attn_bytes);
  // The metadata region: int64 slot offsets first (8-byte aligned), then four int32 arrays.
  meta_bytes_ = t * (sizeof(int64_t) + 4 * sizeof(int32_t));
  const size_t meta = carve.Take(meta_bytes_);
  void* p = nullptr;
  PINFER_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, carve.size()));
  workspace_ = static_cast<uint8_t*>(p);
  auto F = [&](size_t at) { return reinterpret_cast<float*>(workspace_ + at); };
  x_ = F(x), xb_ = F(xb), q_ = F(q), att_ = F(att), k_ = F(k), v_ = F(v);
  gate_ = F(gate), up_ = F(up), d_attn_scratch_ = F(attn);
  // Split attention's counters start at zero (its launches leave them so).
  PINFER_CUDA_RETURN_IF_ERROR(cudaMemset(d_attn_scratch_, 0, attn_bytes));
  d_meta_ = workspace_ + meta;
  void* h = nullptr;
  PINFER_CUDA_RETURN_IF_ERROR(cudaMallocHost(&h, meta_bytes_));
  h_meta_ = static_cast<uint8_t*>(h);
  auto carve_meta = [&](uint8_t* base, int64_t** slot, int32_t** tokens, int32_t** positions,
                        int32_t** table_start, int32_t** logit_rows) {
    *slot = reinterpret_cast<int64_t*>(base);
    int32_t* ints = reinterpret_cast<int32_t*>(base + t * sizeof(int64_t));
    *tokens = ints, *positions = ints + t, *table_start = ints + 2 * t, *logit_rows = ints + 3 * t;
  };
  carve_meta(d_meta_, &d_slot_offset_, &d_tokens_, &d_positions_, &d_table_start_, &d_logit_rows_);
  carve_meta(h_meta_, &h_slot_offset_, &h_tokens_, &h_positions_, &h_table_start_, &h_logit_rows_);
  const int64_t max_cols = std::max({c.dim, c.q_dim(), c.n_ff});
  auto mm = DeviceMatMul::Create(cublas_, max_tokens_, max_cols, permuted_inputs_,
                                 cublas_workspace_, kCublasWorkspaceBytes);
  if (!mm.ok()) return mm.status();
  matmul_ = std::move(*mm);
  workspace_bytes_ = carve.size() + matmul_->scratch_bytes();
  PINFER_RETURN_IF_ERROR(ReserveLogits(t));
  // Block tables for max_tokens sequences of 64 blocks; grown on demand.
  return ReserveTables(t * 64);
}

absl::Status CudaBackend::ReserveForLimits(int max_num_seqs, int max_model_len, int block_size) {
  if (max_num_seqs < 1 || max_model_len < 1 || block_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA backend limits must be positive (", max_num_seqs, " sequences, max_model_len ",
        max_model_len, ", block size ", block_size, ")"));
  }
  // A step holds at most max_num_seqs sequences, each with at most this many blocks.
  const size_t per_seq = static_cast<size_t>((max_model_len + block_size - 1) / block_size);
  PINFER_RETURN_IF_ERROR(ReserveTables(static_cast<size_t>(max_num_seqs) * per_seq));
  // A step wants logits for at most one row per sequence.
  return ReserveLogits(static_cast<size_t>(std::min(max_tokens_, max_num_seqs)));
}

absl::Status CudaBackend::ReserveTables(size_t entries) {
  if (entries <= tables_capacity_) return absl::OkStatus();
  if (!graphs_.empty()) {
    // The graphs' kernels hold the old address; eager steps take over until the next capture.
    std::fprintf(stderr,
                 "warning: CUDA graphs dropped: a step needs %zu block-table entries, more than "
                 "the %zu they were captured with\n",
                 entries, tables_capacity_);
    DropGraphs();
  }
  const size_t capacity = std::max(entries, 2 * tables_capacity_);
  PINFER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  cudaFree(d_tables_);
  cudaFreeHost(h_tables_);
  d_tables_ = nullptr;
  h_tables_ = nullptr;
  tables_capacity_ = 0;
  PINFER_CUDA_RETURN_IF_ERROR(
      cudaMalloc(reinterpret_cast<void**>(&d_tables_), capacity * sizeof(int32_t)));
  PINFER_CUDA_RETURN_IF_ERROR(
      cudaMallocHost(reinterpret_cast<void**>(&h_tables_), capacity * sizeof(int32_t)));
  tables_capacity_ = capacity;
  return absl::OkStatus();
}

absl::Status CudaBackend::ReserveLogits(size_t rows) {
  if (rows == logit_rows_) return absl::OkStatus();
  DropGraphs();  // their output matmul writes the old buffer
  PINFER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  cudaFree(logits_);
  logits_ = nullptr;
  logit_rows_ = 0;
  PINFER_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&logits_),
                                         rows * model_.config().n_vocab * sizeof(float)));
  logit_rows_ = rows;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KvStorage>> CudaBackend::MakeKvStorage(size_t block_bytes,
                                                                      int64_t num_blocks) {
  DropGraphs();      // they point into the previous pool
  kv_pool_.reset();  // the previous pool lives on only as long as a cache still holds it
  auto pool = DeviceKvPool::Create(block_bytes, num_blocks);
  if (!pool.ok()) return pool.status();
  kv_pool_ = std::move(*pool);
  return SharedKvStorage(kv_pool_);
}

absl::Status CudaBackend::UploadMeta(size_t table_entries) {
  PINFER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(d_meta_, h_meta_, meta_bytes_, cudaMemcpyHostToDevice, stream_));
  PINFER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_tables_, h_tables_, table_entries * sizeof(int32_t),
                                              cudaMemcpyHostToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::UploadStep(const ForwardBatch& batch, const KvCache& cache, int padded) {
  const int n = batch.size();
  const int bs = cache.block_size();
  // Size the tables first (Forward has validated the batch): growing them must not clobber
  // staged data.
  table_of_.clear();
  size_t entries = 0;
  for (int t = 0; t < n; ++t) {
    const SeqId seq = batch.seq_ids[t];
    // A sequence's tokens are contiguous in a batch, so looking back one entry finds it.
    if (table_of_.empty() || table_of_.back().first != seq) {
      table_of_.push_back({seq, static_cast<int32_t>(entries)});
      entries += cache.BlockTable(seq).size();
    }
  }
  PINFER_RETURN_IF_ERROR(ReserveTables(std::max<size_t>(entries, 1)));
  size_t seq_index = 0;
  for (int t = 0; t < n; ++t) {
    const SeqId seq = batch.seq_ids[t];
    while (table_of_[seq_index].first != seq) ++seq_index;
    const std::span<const int32_t> table = cache.BlockTable(seq);
    const int32_t start = table_of_[seq_index].second;
    if (t == 0 || batch.seq_ids[t - 1] != seq) {
      std::copy(table.begin(), table.end(), h_tables_ + start);
    }
    const int pos = batch.positions[t];
    h_tokens_[t] = batch.tokens[t];
    h_positions_[t] = pos;
    h_table_start_[t] = start;
    h_slot_offset_[t] = static_cast<int64_t>(table[static_cast<size_t>(pos / bs)]) *
                            static_cast<int64_t>(cache.block_bytes()) +
                        static_cast<int64_t>(pos % bs) * static_cast<int64_t>(cache.row_bytes());
  }
  // Padding rows: token 0 at position 0 of the first sequence's first block, no KV slot.
  for (int t = n; t < padded; ++t) {
    h_tokens_[t] = 0;
    h_positions_[t] = 0;
    h_table_start_[t] = 0;
    h_slot_offset_[t] = -1;
  }
  const int n_out = static_cast<int>(batch.logit_rows.size());
  for (int i = 0; i < n_out; ++i) h_logit_rows_[i] = batch.logit_rows[static_cast<size_t>(i)];
  for (int i = n_out; i < padded; ++i) h_logit_rows_[i] = i;  // a graph's padding rows
  return UploadMeta(std::max<size_t>(entries, 1));
}

bool CudaBackend::HoldsPoolOf(const KvCache& cache) const {
  return kv_pool_ != nullptr && kv_pool_->block_bytes() == cache.block_bytes() &&
         kv_pool_->num_blocks() == cache.num_blocks();
}

KvLayerView CudaBackend::ViewOf(const KvCache& cache) const {
  KvLayerView kv;
  kv.dtype = static_cast<int>(cache.config().dtype);
  kv.base = kv_pool_->device_base();
  kv.block_bytes = cache.block_bytes();
  kv.row_bytes = cache.row_bytes();
  kv.block_size = cache.block_size();
  kv.v_offset = static_cast<size_t>(kv.block_size) * kv.row_bytes;
  kv.kv_dim = model_.config().kv_dim();
  return kv;
}

const CudaBackend::Graph* CudaBackend::GraphFor(const ForwardBatch& batch,
                                                const KvCache& cache) const {
  if (graphs_.empty()) return nullptr;
  const int n = batch.size();
  // Every row wants logits, in order: a decode step (or a one-token prefill).
  if (static_cast<int>(batch.logit_rows.size()) != n) return nullptr;
  for (int i = 0; i < n; ++i) {
    if (batch.logit_rows[static_cast<size_t>(i)] != i) return nullptr;
  }
  const KvLayerView kv = ViewOf(cache);
  if (kv.base != graph_kv_.base || kv.dtype != graph_kv_.dtype ||
      kv.block_bytes != graph_kv_.block_bytes || kv.row_bytes != graph_kv_.row_bytes ||
      kv.block_size != graph_kv_.block_size) {
    return nullptr;
  }
  for (const Graph& g : graphs_) {
    if (g.size >= n) return &g;
  }
  return nullptr;
}

absl::Status CudaBackend::Forward(const ForwardBatch& batch, KvCache& cache, float* logits) {
  const int n = batch.size();
  if (n == 0) return absl::OkStatus();
  PINFER_RETURN_IF_ERROR(ValidateBatch(batch, cache, model_.config().n_vocab, max_tokens_));
  if (!HoldsPoolOf(cache)) {
    return absl::FailedPreconditionError(
        "the KV cache must use the device storage from this backend's MakeKvStorage");
  }
  PINFER_RETURN_IF_ERROR(CheckCudaKvCache(cache));
  PINFER_RETURN_IF_ERROR(kv_pool_->status());
  const int n_out = static_cast<int>(batch.logit_rows.size());
  if (static_cast<size_t>(n_out) > logit_rows_) {
    return absl::InvalidArgumentError(absl::StrCat("a step wants logits for ", n_out,
                                                   " rows; this backend holds ", logit_rows_,
                                                   " (one per sequence of max_num_seqs)"));
  }
  const Graph* graph = GraphFor(batch, cache);
  absl::Status s = UploadStep(batch, cache, graph ? graph->size : n);
  // UploadStep may have dropped the graphs (tables grew): look again.
  if (s.ok() && graph != nullptr && graphs_.empty()) graph = nullptr;
  if (s.ok()) {
    if (graph != nullptr) {
      s = Checked(cudaGraphLaunch(graph->exec, stream_), "cudaGraphLaunch", -1, __LINE__);
      if (s.ok()) ++graph_replays_;
    } else {
      s = Enqueue(n, n_out, ViewOf(cache));
    }
  }
  if (s.ok() && n_out > 0) {
    const cudaError_t err = cudaMemcpyAsync(
        logits, logits_, static_cast<size_t>(n_out) * model_.config().n_vocab * sizeof(float),
        cudaMemcpyDeviceToHost, stream_);
    if (err != cudaSuccess) s = CudaError(err, "cudaMemcpyAsync(logits)", __FILE__, __LINE__);
  }
  // Wait even after a failed launch, so that the staging buffers outlive the copies.
  const cudaError_t sync = cudaStreamSynchronize(stream_);
  if (!s.ok()) return s;
  if (sync != cudaSuccess) {
    return CudaError(sync,
                     graph ? "cudaStreamSynchronize after a CUDA graph replay (rerun with "
                             "--enforce-eager and PINFER_CUDA_SYNC=1 to name the kernel)"
                           : "cudaStreamSynchronize after an eager step (rerun with "
                             "PINFER_CUDA_SYNC=1 to name the kernel)",
                     __FILE__, __LINE__);
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Checked(cudaError_t err, const char* what, int layer, int line) const {
  if (err == cudaSuccess && debug_sync_ && !capturing_) err = cudaStreamSynchronize(stream_);
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string where =
      layer >= 0 ? absl::StrCat(what, " in layer ", layer) : std::string(what);
  return CudaError(err, where.c_str(), __FILE__, line);
}

absl::Status CudaBackend::Checked(const absl::Status& s, const char* what, int layer,
                                  int line) const {
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(what, layer >= 0 ? " in layer " : "",
                                               layer >= 0 ? absl::StrCat(layer) : "", " (",
                                               __FILE__, ":", line, "): ", s.message()));
  }
  return Checked(cudaSuccess, what, layer, line);
}

// One launch (or matmul) of Enqueue, checked with its name and layer (l).
#define PINFER_STEP(expr, what) PINFER_RETURN_IF_ERROR(Checked((expr), what, l, __LINE__))

absl::Status CudaBackend::Enqueue(int n, int n_out, const KvLayerView& kv_in) {
  const ModelConfig& c = model_.config();
  cudaStream_t s = stream_;
  const bool halves = c.rope_style == RopeStyle::kHalves;
  const float scale =
      c.query_scale > 0 ? c.query_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  KvLayerView kv = kv_in;
  // Steps the GEMV serves (decode) also split attention over the context, so that a few
  // sequences still fill the GPU; padded graph steps take the same path as their eager size.
  const bool split = n <= kMaxGemvTokens;
  int l = -1;
  PINFER_STEP(LaunchEmbedding(tok_embd_, d_tokens_, n, x_, s), "embedding");
  for (l = 0; l < c.n_layers; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    kv.layer_offset = static_cast<size_t>(l) * 2 * kv.v_offset;
    PINFER_STEP(LaunchRmsNorm(x_, nullptr, L.attn_norm, n, c.dim, c.rms_eps, xb_, s),
                "attention rmsnorm");
    const DeviceMatrix* qkv[] = {&L.wq, &L.wk, &L.wv};
    float* const qkv_out[] = {q_, k_, v_};
    PINFER_STEP(matmul_->RunMany(qkv, qkv_out, 3, xb_, n, s), "matmul wq, wk, wv");
    if (c.qkv_bias) {
      PINFER_STEP(LaunchAddBias(q_, L.bq, n, c.q_dim(), s), "bias q");
      PINFER_STEP(LaunchAddBias(k_, L.bk, n, c.kv_dim(), s), "bias k");
      PINFER_STEP(LaunchAddBias(v_, L.bv, n, c.kv_dim(), s), "bias v");
    }
    if (c.qk_norm) {  // RMSNorm over each head (rows of head_dim), through att_ (free here)
      const size_t f = sizeof(float);
      PINFER_STEP(
          LaunchRmsNorm(k_, nullptr, L.k_norm, n * c.n_kv_heads, c.head_dim, c.rms_eps, att_, s),
          "k norm");
      PINFER_STEP(cudaMemcpyAsync(k_, att_, n * c.kv_dim() * f, cudaMemcpyDeviceToDevice, s),
                  "k norm copy");
      PINFER_STEP(
          LaunchRmsNorm(q_, nullptr, L.q_norm, n * c.n_heads, c.head_dim, c.rms_eps, att_, s),
          "q norm");
      PINFER_STEP(cudaMemcpyAsync(q_, att_, n * c.q_dim() * f, cudaMemcpyDeviceToDevice, s),
                  "q norm copy");
    }
    PINFER_STEP(
        LaunchRopeKvWrite(kv, q_, c.n_heads, k_, v_, n, d_slot_offset_, c.head_dim, d_positions_,
                          rope_freqs_, halves, s, c.rope_freq_scale, rope_freq_factors_),
        "rope q and k, kv write");
    PINFER_STEP(LaunchAttention(kv, q_, n, c.n_heads, c.n_kv_heads, c.head_dim, scale, d_tables_,
                                d_table_start_, d_positions_, att_, s,
                                split ? d_attn_scratch_ : nullptr, attn_splits_),
                "paged attention");
    PINFER_STEP(matmul_->Run(L.wo, att_, n, x_, s, /*accumulate=*/true), "matmul wo (+ residual)");
    PINFER_STEP(LaunchRmsNorm(x_, nullptr, L.ffn_norm, n, c.dim, c.rms_eps, xb_, s), "ffn rmsnorm");
    PINFER_STEP(matmul_->RunSwiGlu(L.w_gate, L.w_up, xb_, n, gate_, up_, s),
                "matmul w_gate, w_up and swiglu");
    PINFER_STEP(matmul_->Run(L.w_down, gate_, n, x_, s, /*accumulate=*/true),
                "matmul w_down (+ residual)");
  }
  l = -1;
  if (n_out == 0) return absl::OkStatus();
  PINFER_STEP(LaunchRmsNorm(x_, d_logit_rows_, output_norm_, n_out, c.dim, c.rms_eps, xb_, s),
              "output rmsnorm");
  PINFER_STEP(matmul_->Run(output_, xb_, n_out, logits_, s), "matmul output");
  return absl::OkStatus();
}

#undef PINFER_STEP

}  // namespace pinfer::cuda
