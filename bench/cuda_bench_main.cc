// CUDA benchmarks for scripts/gpu-check.sh (needs a GPU):
//   cuda_bench kernels                   achieved GB/s of the GEMV per weight type and of
//                                        decode attention, against device-to-device copy
//   cuda_bench decode MODEL B CTX KV     end-to-end decode tokens/s of B sequences at a
//                                        context of CTX tokens with KV format KV
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_device.h"
#include "cuda/device_matmul.h"
#include "cuda/kernels.h"
#include "engine/engine.h"
#include "loaders/quants.h"

namespace {

using namespace pinfer;

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

int Kernels() {
  const size_t copy_bytes = 1ull << 30;
  void *src, *dst;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&src), copy_bytes));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&dst), copy_bytes));
  const double copy_ms =
      TimeMs([&] { CHECK_CUDA(cudaMemcpy(dst, src, copy_bytes, cudaMemcpyDeviceToDevice)); }, 10);
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e6);  // read + write
  std::printf("device-to-device copy: %.0f GB/s (read + write)\n\n", copy_gbs);
  std::printf("%-28s %10s %10s %8s\n", "kernel", "us", "GB/s", "of copy");
  const int64_t rows = 11008, cols = 4096;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> f(cols);
  for (float& x : f) x = u(rng);
  float *x, *y;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&x), 16 * cols * 4));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&y), 16 * rows * 4));
  CHECK_CUDA(cudaMemset(x, 0, 16 * cols * 4));
  for (GgmlType t : {GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                     GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    const size_t rb = GgmlRowBytes(t, cols);
    std::vector<uint8_t> row(rb), host(rb * rows);
    QuantizeRow(t, f.data(), row.data(), cols);
    for (int64_t r = 0; r < rows; ++r) std::copy(row.begin(), row.end(), host.begin() + r * rb);
    uint8_t* w;
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&w), host.size()));
    CHECK_CUDA(cudaMemcpy(w, host.data(), host.size(), cudaMemcpyHostToDevice));
    cuda::DeviceMatrix dm{static_cast<int>(t), rows, cols, rb, w};
    for (int n : {1, 16}) {
      const double ms =
          TimeMs([&] { CHECK_CUDA(cuda::LaunchGemv(dm, x, n, y, rows, nullptr)); }, 50);
      const double gbs = (host.size() + 4.0 * n * (cols + rows)) / (ms * 1e6);
      std::printf("gemv %-6s 11008x4096 n=%-2d %10.1f %10.0f %7.0f%%\n",
                  std::string(GgmlTypeInfoOf(t).name).c_str(), n, ms * 1e3, gbs,
                  100 * gbs / copy_gbs);
    }
    cudaFree(w);
  }
  // Decode attention: 16 sequences x 32 heads (8 KV heads) x head_dim 128 at a context.
  for (int kvd : {cuda::kKF16, cuda::kKQ8_0}) {
    for (int ctx : {512, 4096}) {
      const int seqs = 16, heads = 32, kvh = 8, hd = 128, bs = 16, kv_dim = kvh * hd;
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
            CHECK_CUDA(
                cuda::LaunchAttention(kv, q, seqs, heads, kvh, hd, 0.088f, dt, ds, dp, o, nullptr));
          },
          20);
      const double gbs = (2.0 * row * ctx * seqs) / (ms * 1e6);
      std::printf("attention %-4s 16 seqs ctx=%-4d %10.1f %10.0f %7.0f%%\n",
                  kvd == cuda::kKF16 ? "f16" : "q8_0", ctx, ms * 1e3, gbs, 100 * gbs / copy_gbs);
      cudaFree(pool), cudaFree(dt), cudaFree(ds), cudaFree(dp), cudaFree(q), cudaFree(o);
    }
  }
  return 0;
}

int Decode(const std::string& path, int batch, int ctx, const std::string& kv) {
  auto model = Model::Load(path);
  if (!model.ok())
    return std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str()), 1;
  const int gen = 32;
  EngineConfig cfg;
  auto d = ParseKvDtype(kv);
  if (!d.ok()) return 1;
  cfg.kv_dtype = *d;
  cfg.max_num_seqs = batch;
  cfg.max_model_len = ctx + gen;
  cfg.max_num_batched_tokens = std::max(512, batch);
  auto backend = cuda::MakeCudaBackend(**model, cfg.max_num_batched_tokens);
  if (!backend.ok())
    return std::fprintf(stderr, "%s\n", std::string(backend.status().message()).c_str()), 1;
  auto e = Engine::Create(**model, cfg, std::move(*backend), true);
  if (!e.ok()) return std::fprintf(stderr, "%s\n", std::string(e.status().message()).c_str()), 1;
  std::mt19937 rng(7);
  for (int b = 0; b < batch; ++b) {
    GenerationRequest r;
    for (int i = 0; i < ctx; ++i) r.prompt.push_back(1 + static_cast<int32_t>(rng() % 1000));
    r.params.temperature = 0;
    r.params.max_tokens = gen;
    r.params.ignore_eos = true;
    if (!(*e)->AddRequest(r).ok()) return 1;
  }
  int64_t decoded = 0;
  double secs = 0;
  while ((*e)->HasWork()) {
    const int64_t prefill_before = (*e)->stats().prefill_tokens;
    const auto t0 = std::chrono::steady_clock::now();
    auto out = (*e)->Step();
    if (!out.ok())
      return std::fprintf(stderr, "%s\n", std::string(out.status().message()).c_str()), 1;
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if ((*e)->stats().prefill_tokens == prefill_before) {  // a pure decode step
      secs += dt;
      for (const auto& o : *out) decoded += static_cast<int64_t>(o.new_tokens.size());
    }
  }
  std::printf("decode %-40s batch %2d ctx %4d kv %-5s %8.1f tok/s\n",
              path.substr(path.find_last_of('/') + 1).c_str(), batch, ctx, kv.c_str(),
              secs > 0 ? decoded / secs : 0.0);
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
  if (mode == "decode" && argc == 6)
    return Decode(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), argv[5]);
  std::fprintf(stderr, "usage: cuda_bench kernels | cuda_bench decode MODEL BATCH CTX KV\n");
  return 2;
}
