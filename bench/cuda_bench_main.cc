// CUDA benchmarks for scripts/gpu-check.sh (needs a GPU):
//   cuda_bench kernels                   achieved GB/s of the GEMV per weight type and of
//                                        decode attention, against device-to-device copy
//   cuda_bench decode MODEL B CTX KV [eager]
//                                        end-to-end decode tokens/s of B sequences at a
//                                        context of CTX tokens with KV format KV, replaying
//                                        CUDA graphs (or every step eager), and the bytes a
//                                        decode step reads (weights + KV) per second against
//                                        device-to-device copy
// Besides the text for people, each figure is one "RESULT key=value ..." line for scripts.
// PINFER_BENCH_QUICK=1: small shapes and one timed run each, to check that the benchmarks
// run (CTest runs them so on the CUDA emulator); its figures measure nothing.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_device.h"
#include "cuda/device_matmul.h"
#include "cuda/kernels.h"
#include "engine/engine.h"
#include "loaders/quants.h"

namespace {

using namespace pinfer;

bool Quick() {
  static const bool quick = [] {
    const char* e = std::getenv("PINFER_BENCH_QUICK");
    return e != nullptr && std::string(e) == "1";
  }();
  return quick;
}

#define CHECK_CUDA(x)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

template <typename Fn>
double TimeMs(Fn fn, int iters) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  if (Quick()) iters = 1;
  fn();  // warm-up
  CHECK_CUDA(cudaEventRecord(a));
  for (int i = 0; i < iters; ++i) fn();
  CHECK_CUDA(cudaEventRecord(b));
  CHECK_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

// Device-to-device copy of 1 GiB, bytes read + written per second, in GB/s.
double CopyGbs() {
  const size_t copy_bytes = Quick() ? 16ull << 20 : 1ull << 30;
  void *src, *dst;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&src), copy_bytes));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&dst), copy_bytes));
  const double copy_ms =
      TimeMs([&] { CHECK_CUDA(cudaMemcpy(dst, src, copy_bytes, cudaMemcpyDeviceToDevice)); }, 10);
  CHECK_CUDA(cudaFree(src));
  CHECK_CUDA(cudaFree(dst));
  return 2.0 * copy_bytes / (copy_ms * 1e6);
}

// The decode GEMV on one [rows x cols] matrix of type t (every row the same quantized row),
// in both lane layouts for block types, for 1 and 16 tokens.
void BenchGemv(GgmlType t, int64_t rows, int64_t cols, const float* x, float* y, double copy_gbs) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> f(cols);
  for (float& v : f) v = u(rng);
  const size_t rb = GgmlRowBytes(t, cols);
  std::vector<uint8_t> row(rb), host(rb * rows);
  QuantizeRow(t, f.data(), row.data(), cols);
  for (int64_t r = 0; r < rows; ++r) std::copy(row.begin(), row.end(), host.begin() + r * rb);
  uint8_t* w;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&w), host.size()));
  CHECK_CUDA(cudaMemcpy(w, host.data(), host.size(), cudaMemcpyHostToDevice));
  cuda::DeviceMatrix dm{static_cast<int>(t), rows, cols, rb, w};
  // Block types in both GEMV lane layouts (kernels.h): "units" rows are the alternative.
  const bool block_type = t != GgmlType::kF16;
  for (cuda::GemvLayout layout : {cuda::GemvLayout::kGroups, cuda::GemvLayout::kUnits}) {
    if (!block_type && layout == cuda::GemvLayout::kUnits) continue;
    cuda::SetGemvLayout(layout);
    const char* suffix = layout == cuda::GemvLayout::kUnits ? "_units" : "";
    for (int n : {1, 16}) {
      const double ms =
          TimeMs([&] { CHECK_CUDA(cuda::LaunchGemv(dm, x, n, y, rows, nullptr)); }, 50);
      const double gbs = (host.size() + 4.0 * n * (cols + rows)) / (ms * 1e6);
      std::printf("gemv %-6s%-6s %lldx%lld n=%-2d %10.1f %10.0f %7.0f%%\n",
                  std::string(GgmlTypeInfoOf(t).name).c_str(), suffix, static_cast<long long>(rows),
                  static_cast<long long>(cols), n, ms * 1e3, gbs, 100 * gbs / copy_gbs);
      std::printf("RESULT kernel name=gemv_%s%s_n%d us=%.1f gbs=%.1f pct=%.1f\n",
                  std::string(GgmlTypeInfoOf(t).name).c_str(), suffix, n, ms * 1e3, gbs,
                  100 * gbs / copy_gbs);
    }
  }
  cuda::SetGemvLayout(cuda::GemvLayout::kGroups);
  cudaFree(w);
}

// Decode attention for `seqs` sequences of ctx positions, 32 heads (8 KV heads) x head_dim
// 128 in KV format kvd, split over the context as the backend does (split: the scratch).
void BenchAttention(int kvd, int ctx, int seqs, float* split, int splits, double copy_gbs) {
  const int heads = 32, kvh = 8, hd = 128, bs = 16, kv_dim = kvh * hd;
  const size_t row = kvd == cuda::kKF16 ? 2 * kv_dim : kv_dim / 32 * 34;
  const int blocks_per = ctx / bs;
  const size_t block_bytes = 2 * bs * row;  // one layer
  uint8_t* pool;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&pool), block_bytes * seqs * blocks_per));
  CHECK_CUDA(cudaMemset(pool, 0, block_bytes * seqs * blocks_per));
  std::vector<int32_t> tables(seqs * blocks_per), start(seqs), pos(seqs, ctx - 1);
  for (int i = 0; i < seqs * blocks_per; ++i) tables[i] = i;
  for (int s = 0; s < seqs; ++s) start[s] = s * blocks_per;
  int32_t *dt, *ds, *dp;
  float *q, *o;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&dt), tables.size() * 4));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&ds), seqs * 4));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&dp), seqs * 4));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&q), seqs * heads * hd * 4));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&o), seqs * heads * hd * 4));
  CHECK_CUDA(cudaMemset(q, 0, seqs * heads * hd * 4));
  CHECK_CUDA(cudaMemcpy(dt, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(ds, start.data(), seqs * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dp, pos.data(), seqs * 4, cudaMemcpyHostToDevice));
  cuda::KvLayerView kv;
  kv.dtype = kvd;
  kv.base = pool;
  kv.block_bytes = block_bytes;
  kv.row_bytes = row;
  kv.block_size = bs;
  kv.v_offset = bs * row;
  kv.kv_dim = kv_dim;
  const double ms = TimeMs(
      [&] {
        CHECK_CUDA(cuda::LaunchAttention(kv, q, seqs, heads, kvh, hd, 0.088f, dt, ds, dp, o,
                                         nullptr, split, splits));
      },
      20);
  const double gbs = (2.0 * row * ctx * seqs) / (ms * 1e6);
  const char* kv_name = kvd == cuda::kKF16 ? "f16" : "q8_0";
  std::printf("attention %-4s %2d seqs ctx=%-4d %9.1f %10.0f %7.0f%%\n", kv_name, seqs, ctx,
              ms * 1e3, gbs, 100 * gbs / copy_gbs);
  std::printf("RESULT kernel name=attention_%s_b%d_ctx%d us=%.1f gbs=%.1f pct=%.1f\n", kv_name,
              seqs, ctx, ms * 1e3, gbs, 100 * gbs / copy_gbs);
  cudaFree(pool), cudaFree(dt), cudaFree(ds), cudaFree(dp), cudaFree(q), cudaFree(o);
}

int Kernels() {
  const double copy_gbs = CopyGbs();
  std::printf("device-to-device copy: %.0f GB/s (read + write)\n\n", copy_gbs);
  std::printf("RESULT copy gbs=%.1f\n", copy_gbs);
  std::printf("%-28s %10s %10s %8s\n", "kernel", "us", "GB/s", "of copy");
  const int64_t rows = Quick() ? 96 : 11008, cols = Quick() ? 512 : 4096;
  float *x, *y;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&x), 16 * cols * 4));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&y), 16 * rows * 4));
  CHECK_CUDA(cudaMemset(x, 0, 16 * cols * 4));
  for (GgmlType t : {GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                     GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    BenchGemv(t, rows, cols, x, y, copy_gbs);
  }
  // Decode attention as a decode step runs it (as many splits as the backend takes on this
  // GPU): 1 and 16 sequences.
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const int splits = cuda::AttentionMaxSplits(32, prop.multiProcessorCount);
  const size_t split_bytes = cuda::AttentionSplitFloats(16, 32, 128, splits) * sizeof(float);
  float* split = nullptr;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&split), split_bytes));
  CHECK_CUDA(cudaMemset(split, 0, split_bytes));
  for (int kvd : {cuda::kKF16, cuda::kKQ8_0}) {
    for (int ctx : Quick() ? std::vector<int>{64} : std::vector<int>{512, 4096}) {
      for (int seqs : {1, 16}) BenchAttention(kvd, ctx, seqs, split, splits, copy_gbs);
    }
  }
  cudaFree(split);
  return 0;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
  return 1;
}

// Bytes a decode step of `batch` sequences at `ctx` tokens reads: every weight matrix but the
// embedding (one row per token, left out) and each sequence's K/V.
uint64_t DecodeStepBytes(const Model& m, const KvCache& cache, int batch, int ctx) {
  const ModelWeights& w = m.weights();
  uint64_t bytes = w.output.bytes();
  for (const LayerWeights& L : w.layers) {
    for (const WeightMatrix* x : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
      bytes += x->bytes();
    }
  }
  return bytes + static_cast<uint64_t>(batch) * ctx * cache.bytes_per_token();
}

int Decode(const std::string& path, int batch, int ctx, const std::string& kv, bool eager) {
  const double copy_gbs = CopyGbs();
  auto model = Model::Load(path);
  if (!model.ok()) return Fail(model.status());
  const int gen = Quick() ? 4 : 32;
  EngineConfig cfg;
  auto d = ParseKvDtype(kv);
  if (!d.ok()) return Fail(d.status());
  cfg.kv_dtype = *d;
  cfg.max_num_seqs = batch;
  cfg.max_model_len = ctx + gen;
  cfg.max_num_batched_tokens = std::max(2048, batch);
  cfg.enforce_eager = eager;
  auto backend = cuda::MakeCudaBackend(**model, cfg.max_num_batched_tokens);
  if (!backend.ok()) return Fail(backend.status());
  auto e = Engine::Create(**model, cfg, std::move(*backend), true);
  if (!e.ok()) return Fail(e.status());
  std::mt19937 rng(7);
  for (int b = 0; b < batch; ++b) {
    GenerationRequest r;
    const uint32_t ids = static_cast<uint32_t>(std::min((*model)->config().n_vocab - 1, 1000));
    for (int i = 0; i < ctx; ++i) r.prompt.push_back(1 + static_cast<int32_t>(rng() % ids));
    r.params.temperature = 0;
    r.params.max_tokens = gen;
    r.params.ignore_eos = true;
    if (absl::Status s = (*e)->AddRequest(r).status(); !s.ok()) return Fail(s);
  }
  int64_t decoded = 0, steps = 0;
  double secs = 0;
  while ((*e)->HasWork()) {
    const int64_t prefill_before = (*e)->stats().prefill_tokens;
    const auto t0 = std::chrono::steady_clock::now();
    auto out = (*e)->Step();
    if (!out.ok()) return Fail(out.status());
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Pure decode steps of the full batch (the first one, right after prefill, is left out).
    if ((*e)->stats().prefill_tokens == prefill_before && static_cast<int>(out->size()) == batch) {
      if (steps++ == 0) continue;
      secs += dt;
      for (const auto& o : *out) decoded += static_cast<int64_t>(o.new_tokens.size());
    }
  }
  const auto& cb = dynamic_cast<const cuda::CudaBackend&>((*e)->backend());
  const double tok_s = secs > 0 ? decoded / secs : 0.0;
  const double step_s = secs > 0 ? (decoded / static_cast<double>(batch)) / secs : 0.0;
  const double gbs = step_s * DecodeStepBytes(**model, (*e)->cache(), batch, ctx + gen / 2) / 1e9;
  const std::string name = path.substr(path.find_last_of('/') + 1);
  const char* gemv = cuda::CurrentGemvLayout() == cuda::GemvLayout::kUnits ? "units" : "groups";
  const int pdl = cuda::ProgrammaticLaunch() ? 1 : 0;
  std::printf(
      "decode %-28s batch %2d ctx %4d kv %-5s %-6s gemv %-6s pdl %d %8.1f tok/s %7.0f GB/s "
      "(%3.0f%% "
      "of copy)\n",
      name.c_str(), batch, ctx, kv.c_str(), eager ? "eager" : "graphs", gemv, pdl, tok_s, gbs,
      100 * gbs / copy_gbs);
  std::printf(
      "RESULT decode model=%s batch=%d ctx=%d kv=%s mode=%s gemv=%s pdl=%d tok_s=%.1f gbs=%.1f "
      "copy_gbs=%.1f pct=%.1f replays=%lld\n",
      name.c_str(), batch, ctx, kv.c_str(), eager ? "eager" : "graphs", gemv, pdl, tok_s, gbs,
      copy_gbs, 100 * gbs / copy_gbs, static_cast<long long>(cb.graph_replays()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (absl::Status s = cuda::CudaDeviceStatus(); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "kernels") return Kernels();
  if (mode == "decode" && (argc == 6 || (argc == 7 && std::string(argv[6]) == "eager"))) {
    return Decode(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), argv[5], argc == 7);
  }
  std::fprintf(stderr,
               "usage: cuda_bench kernels | cuda_bench decode MODEL BATCH CTX KV [eager]\n");
  return 2;
}
