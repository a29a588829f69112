#include "examples/pagedinfer/engine_flags.h"

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_backend.h"

#if PAGEDINFER_WITH_CUDA
#include "cuda/cuda_device.h"
#endif

namespace pinfer::cli {

void EngineFlags::Register(Args& a) {
  a.Add("-m,--model", &model, "model: a GGUF file or a Hugging Face folder");
  a.Add("--kv-dtype", &kv_dtype, "KV cache format: f32, f16, bf16, q8_0, q4_0, fp8");
  a.Add("--kv-layout", &kv_layout, "KV cache layout: paged or contiguous");
  a.Add("--block-size", &block_size, "token slots per KV block (8..256)");
  a.Add("--max-model-len", &max_model_len,
        "longest sequence, prompt + output (0: model's, <= 4096)");
  a.Add("--max-num-seqs", &max_num_seqs, "sequences running at once");
  a.Add("--max-num-batched-tokens", &max_num_batched_tokens, "tokens per step (chunked prefill)");
  a.Add("--admission-headroom", &admission_headroom,
        "tokens of growth kept free per running sequence when admitting (0: admit when the "
        "prompt fits, preempting later)");
  a.Add("--kv-cache-memory", &kv_cache_memory,
        "KV pool size, e.g. 2GiB (default: from --memory-utilization)");
  a.Add("--memory-utilization", &memory_utilization,
        "fraction of available RAM (cpu) or free device memory (cuda) the engine may use");
  a.Add("--reserve", &reserve, "runtime reserve line of the memory ledger");
  a.Add("-t,--threads", &threads, "CPU threads (0: all)");
  a.AddSwitch("--no-prefix-caching", &no_prefix_caching, "do not reuse cached prompt blocks");
  a.AddSwitch("--enforce-eager", &enforce_eager,
              "cuda: run every step eagerly, without capturing CUDA graphs for decode steps "
              "(accepted and without effect on cpu)");
  a.Add("--device", &device,
        "where the model runs: cuda, cpu, or auto (cuda when built with it and a GPU is present)");
}

absl::StatusOr<std::unique_ptr<Backend>> EngineFlags::MakeBackend(const Model& model,
                                                                  const EngineConfig& config,
                                                                  std::string* chosen) const {
  if (device != "auto" && device != "cuda" && device != "cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --device '", device, "'; choose cuda, cpu or auto"));
  }
  std::string why_not_cuda;
#if PAGEDINFER_WITH_CUDA
  if (device != "cpu") {
    const absl::Status present = cuda::CudaDeviceStatus();
    if (present.ok()) {
      auto b = cuda::MakeCudaBackend(model, config.max_num_batched_tokens);
      if (!b.ok()) return b.status();
      if (chosen) *chosen = cuda::DescribeCudaDevice();
      return b;
    }
    if (device == "cuda") return present;
    why_not_cuda = absl::StrCat(" (", present.message(), ")");
  }
#else
  if (device == "cuda") {
    return absl::FailedPreconditionError(
        "--device cuda: this build has no CUDA backend (nvcc was not found when it was "
        "configured); use --device cpu");
  }
#endif
  auto cpu = std::make_unique<CpuBackend>(model, config.max_num_batched_tokens, config.threads);
  if (chosen) *chosen = absl::StrCat("cpu, ", cpu->threads(), " threads", why_not_cuda);
  return std::unique_ptr<Backend>(std::move(cpu));
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
  return c;
}

}  // namespace pinfer::cli
