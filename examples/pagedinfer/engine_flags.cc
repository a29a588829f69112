#include "examples/pagedinfer/engine_flags.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_backend.h"
#include "examples/pagedinfer/progress.h"

#if PAGEDINFER_WITH_CUDA
#include "cuda/cuda_device.h"
#endif

namespace pinfer::cli {

void EngineFlags::Register(Args& a) {
  a.Add("-m,--model", &model, "model: a GGUF file or a Hugging Face folder");
  a.Add("--kv-dtype", &kv_dtype, "KV cache format: f32, f16, bf16, q8_0, q4_0, fp8");
  a.Add("--kv-layout", &kv_layout, "KV cache layout: paged or contiguous");
  a.Add("--block-size", &block_size, "token slots per KV block (8..256)");
  a.Add("-c,--ctx-size,--max-model-len", &max_model_len,
        "longest sequence, prompt + output (0: model's, <= 4096)");
  a.Add("-np,--parallel,--max-num-seqs", &max_num_seqs, "sequences running at once");
  a.Add("-b,--batch-size,--max-num-batched-tokens", &max_num_batched_tokens,
        "tokens per step (chunked prefill)");
  a.Add("--admission-headroom", &admission_headroom,
        "tokens of growth kept free per running sequence when admitting (0: admit when the "
        "prompt fits, preempting later)");
  a.Add("--kv-cache-memory", &kv_cache_memory,
        "KV pool size, e.g. 2GiB (default: cpu, --max-num-seqs sequences of --max-model-len "
        "capped by --memory-utilization; cuda, all that --memory-utilization of free device "
        "memory leaves, as vLLM)");
  a.Add("--memory-utilization", &memory_utilization,
        "fraction of available RAM (cpu, within any cgroup limit) or free device memory (cuda) "
        "the engine may use");
  a.Add("--reserve", &reserve, "runtime reserve line of the memory ledger");
  a.Add("-t,--threads", &threads, "CPU threads (0: all)");
  a.AddSwitch("--no-prefix-caching", &no_prefix_caching, "do not reuse cached prompt blocks");
  a.AddSwitch("--mlock", &mlock,
              "cpu: lock the weights, workspace and KV pool in memory (never dropped or "
              "swapped); fails at start, naming the memlock limit, when the OS refuses (cuda: "
              "they are device memory; no effect)");
  RegisterDevice(a);
}

void EngineFlags::RegisterDevice(Args& a) {
  a.AddSwitch("--enforce-eager", &enforce_eager,
              "cuda: run every step eagerly, without capturing CUDA graphs for decode steps "
              "(accepted and without effect on cpu)");
  a.AddSwitch("-nr,--no-repack", &no_repack,
              "cpu: keep the weights in the file's layout instead of repacking the formats with "
              "packed kernels (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K) into 8-row groups at load "
              "(llama.cpp's flag)");
  a.Add("--device", &device,
        "where the model runs: cuda, cpu, or auto (cuda when built with it and a GPU is present)");
  a.Add("-ngl,--n-gpu-layers,--gpu-layers", &n_gpu_layers,
        "llama.cpp's layer offload: 0 runs on the cpu; all layers (e.g. 99) on the GPU when "
        "there is one (else the cpu, with a warning); a part is not supported");
}

absl::StatusOr<std::string> EngineFlags::Device(const Model& model) const {
  if (device != "auto" && device != "cuda" && device != "cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --device '", device, "'; choose cuda, cpu or auto"));
  }
  if (n_gpu_layers < 0) return device;
  const int layers = model.config().n_layers;
  if (n_gpu_layers > 0 && n_gpu_layers < layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("-ngl ", n_gpu_layers, " offloads part of the model's ", layers,
                     " layers; pagedinfer runs a model wholly on one device: -ngl 0 (cpu) or -ngl ",
                     layers, " or more (the GPU)"));
  }
  const bool all_on_gpu = n_gpu_layers > 0;
  if ((all_on_gpu && device == "cpu") || (!all_on_gpu && device == "cuda")) {
    return absl::InvalidArgumentError(
        absl::StrCat("-ngl ", n_gpu_layers, " contradicts --device ", device));
  }
  if (!all_on_gpu) return std::string("cpu");
  return device;  // cuda, or auto: the GPU when there is one
}

absl::StatusOr<std::unique_ptr<Backend>> EngineFlags::MakeBackend(const Model& model,
                                                                  const EngineConfig& config,
                                                                  std::string* chosen) const {
  absl::StatusOr<std::string> dev = Device(model);
  if (!dev.ok()) return dev.status();
  std::string why_not_cuda;
#if PAGEDINFER_WITH_CUDA
  if (*dev != "cpu") {
    const absl::Status present = cuda::CudaDeviceStatus();
    if (present.ok()) {
      auto b = cuda::MakeCudaBackend(model, config.max_num_batched_tokens);
      if (!b.ok()) return b.status();
      if (chosen) *chosen = cuda::DescribeCudaDevice();
      return b;
    }
    if (*dev == "cuda") {
      return absl::FailedPreconditionError(
          absl::StrCat("--device cuda: ", present.message(),
                       "; this machine has no usable GPU (use --device cpu or --device auto)"));
    }
    why_not_cuda = absl::StrCat(" (", present.message(), ")");
  }
#else
  if (*dev == "cuda") {
    return absl::FailedPreconditionError(
        "--device cuda: this build has no CUDA backend (nvcc was not found when it was "
        "configured), so no CUDA device can be used; use --device cpu");
  }
#endif
  if (n_gpu_layers > 0) {
    std::fprintf(stderr, "warning: -ngl %d: no usable CUDA device%s; running on the cpu\n",
                 n_gpu_layers, why_not_cuda.empty() ? " in this build" : why_not_cuda.c_str());
  }
  auto cpu = std::make_unique<CpuBackend>(model, config.max_num_batched_tokens, config.threads,
                                          config.repack);
  if (chosen) *chosen = absl::StrCat("cpu, ", cpu->threads(), " threads", why_not_cuda);
  return std::unique_ptr<Backend>(std::move(cpu));
}

absl::StatusOr<std::unique_ptr<Engine>> MakeEngine(const EngineFlags& flags, const Model& model,
                                                   const EngineConfig& config,
                                                   std::string* device) {
  std::string chosen;
  auto backend = flags.MakeBackend(model, config, &chosen);
  if (!backend.ok()) return backend.status();
  if (device) *device = chosen;
  return Engine::Create(model, config, std::move(*backend), /*quiet=*/true);
}

absl::StatusOr<LoadedEngine> LoadEngine(const EngineFlags& flags, const EngineConfig& config) {
  LoadedEngine le;
  {
    const size_t slash = flags.model.find_last_of('/');
    LoadProgress progress(slash == std::string::npos ? flags.model : flags.model.substr(slash + 1));
    progress.Stage("mapping the file, binding weights and tokenizer");
    auto model = Model::Load(flags.model);
    if (!model.ok()) return model.status();
    le.model = std::move(*model);
    progress.Stage("preparing the weights on the device, reserving the KV pool");
    auto engine = MakeEngine(flags, *le.model, config, &le.device);
    if (!engine.ok()) return engine.status();
    le.engine = std::move(*engine);
  }
  std::fprintf(stderr, "device: %s\n%s\n", le.device.c_str(), le.engine->pool_summary().c_str());
  return le;
}

absl::StatusOr<EngineConfig> EngineFlags::ToConfig() const {
  EngineConfig c;
  auto dtype = ParseKvDtype(kv_dtype);
  if (!dtype.ok()) return dtype.status();
  auto layout = ParseKvLayout(kv_layout);
  if (!layout.ok()) return layout.status();
  c.kv_dtype = *dtype;
  c.kv_layout = *layout;
  c.block_size = block_size;
  c.max_model_len = max_model_len;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = max_num_batched_tokens;
  c.admission_headroom = admission_headroom;
  if (!kv_cache_memory.empty()) {
    auto bytes = ParseBytes(kv_cache_memory);
    if (!bytes.ok()) return bytes.status();
    c.kv_cache_memory = *bytes;
  }
  auto res = ParseBytes(reserve);
  if (!res.ok()) return res.status();
  c.reserve_bytes = *res;
  c.memory_utilization = memory_utilization;
  c.threads = threads;
  c.prefix_caching = !no_prefix_caching;
  c.enforce_eager = enforce_eager;
  c.mlock = mlock;
  c.repack = !no_repack;
  return c;
}

}  // namespace pinfer::cli
