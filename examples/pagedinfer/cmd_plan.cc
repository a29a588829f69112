// pagedinfer plan: the memory ledger for a model and engine settings, before loading anything.
// It calls the same ComputeLedger the engine calls at start, so for the same settings it
// prints the bytes `run`/`serve` reserve.
#include <cstdio>
#include <string>

#include "absl/strings/str_join.h"
#include "engine/memory/memory_ledger.h"
#include "engine/memory/model_plan.h"
#include "engine/memory/system_memory.h"
#include "engine/model/model_shapes.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"

namespace pinfer::cli {
namespace {

struct PlanFlags {
  std::string model, shape, type = "Q4_K_M", memory, kv = "f16", reserve, kv_cache_memory;
  std::string device = "cuda";
  LedgerOptions o;
  bool json = false;

  void Register(Args& args) {
    args.Add("-m,--model", &model, "model: a GGUF file or a Hugging Face folder");
    args.Add("--shape", &shape,
             "named shape instead of a file: " + absl::StrJoin(NamedShapeNames(), ", "));
    args.Add("--type", &type, "file type with --shape (Q4_0, Q4_K_M, Q8_0, F16, ...)");
    args.Add("--memory", &memory,
             "memory the engine may use in all (e.g. 16GiB); default on --device cpu: "
             "--memory-utilization of the memory available here, as the engine does");
    args.Add("--memory-utilization", &o.memory_utilization,
             "fraction of the available memory the engine may use (without --memory)");
    args.Add("--kv-cache-memory", &kv_cache_memory,
             "KV pool size (e.g. 4GiB) instead of --max-num-seqs sequences capped by the budget");
    args.Add("--kv-dtype", &kv, "KV cache format: f32, f16, bf16, q8_0, q4_0, fp8");
    args.Add("--block-size", &o.block_size, "tokens per KV block");
    args.Add("-c,--max-model-len", &o.max_model_len,
             "tokens per sequence (prompt + output); 0: the model's context length, <= 4096");
    args.Add("-np,--max-num-seqs", &o.max_num_seqs,
             "sequences running at once (serve's default; run and chat use 1)");
    args.Add("-b,--max-num-batched-tokens", &o.max_num_batched_tokens, "tokens per forward step");
    args.Add("-t,--threads", &o.threads, "CPU threads (0: all), for the CPU workspace");
    args.Add("--device", &device,
             "where the engine will run: cuda (default reserve 1GiB: context, cuBLAS, slack) or "
             "cpu (the engine's CPU default, 64MiB)");
    args.Add("--reserve", &reserve,
             "runtime reserve (allocator slack, runtime buffers); default from --device");
    args.AddSwitch("--json", &json, "print JSON instead of a table");
  }

  // The ledger's options from the flags: the budget (--memory, or the host's available
  // memory on --device cpu), the pool, the reserve and the KV format.
  absl::Status Resolve() {
    if (model.empty() == shape.empty()) {
      return absl::InvalidArgumentError("give either -m FILE or --shape NAME (see --help)");
    }
    if (device != "cuda" && device != "cpu") {
      return absl::InvalidArgumentError("--device must be cuda or cpu, not '" + device + "'");
    }
    o.host = device == "cpu";
    if (reserve.empty()) reserve = o.host ? "64MiB" : "1GiB";
    absl::StatusOr<uint64_t> reserve_bytes = ParseBytes(reserve);
    if (!reserve_bytes.ok()) return reserve_bytes.status();
    o.reserve_bytes = *reserve_bytes;
    absl::StatusOr<KvDtype> kv_dtype = ParseKvDtype(kv);
    if (!kv_dtype.ok()) return kv_dtype.status();
    o.kv_dtype = *kv_dtype;
    if (!kv_cache_memory.empty()) {
      absl::StatusOr<uint64_t> pool = ParseBytes(kv_cache_memory);
      if (!pool.ok()) return pool.status();
      o.kv_cache_memory = *pool;
    }
    return ResolveMemory();
  }

  absl::Status ResolveMemory() {
    if (!memory.empty()) {
      absl::StatusOr<uint64_t> budget = ParseBytes(memory);
      if (!budget.ok()) return budget.status();
      o.budget_bytes = *budget;
      o.available_bytes = *budget;  // what an explicit pool must fit in
      o.available_source = "--memory";
      return absl::OkStatus();
    }
    if (!o.host) {
      if (o.kv_cache_memory > 0) return absl::OkStatus();
      return absl::InvalidArgumentError(
          "--memory is required with --device cuda (plan cannot see the GPU): how much memory "
          "the engine may use in all, e.g. --memory 16GiB");
    }
    absl::StatusOr<AvailableMemory> available = AvailableHostMemory();
    if (!available.ok()) return available.status();
    o.available_bytes = available->bytes;
    o.available_source = available->source;
    o.budget_option = "--memory-utilization (or give --memory)";
    return absl::OkStatus();
  }
};

}  // namespace

int PlanMain(int argc, char** argv) {
  PlanFlags f;
  Args args("plan",
            "pagedinfer plan (--shape NAME --type TYPE | -m FILE) [--memory BYTES] [options]\n"
            "Prints the memory ledger: weights, KV bytes per token, workspace, reserve, and the\n"
            "KV pool. Exit status 1 when the configuration does not fit.",
            {"pagedinfer plan --shape llama2-7b --type Q4_0 --memory 16GiB --kv-dtype f16",
             "pagedinfer plan --shape mistral-7b --type Q4_K_M --memory 8GiB --max-model-len "
             "32768 --json",
             "pagedinfer plan -m model.gguf --device cpu --kv-cache-memory 4GiB -t 8"});
  f.Register(args);
  if (int rc = ParseOrExit(args, argc, argv); rc >= 0) return rc;
  if (absl::Status s = f.Resolve(); !s.ok()) return Fail(s, 2);
  absl::StatusOr<PlanInput> input =
      f.model.empty() ? PlanInputFromShape(f.shape, f.type) : PlanInputFromModelFile(f.model);
  if (!input.ok()) return Fail(input.status(), 2);
  absl::StatusOr<MemoryLedger> ledger = ComputeLedger(*input, f.o);
  if (!ledger.ok()) return Fail(ledger.status(), 2);
  std::string out = f.json ? ledger->ToJson() + "\n" : ledger->ToText();
  std::fputs(out.c_str(), stdout);
  return ledger->fits ? 0 : 1;
}

}  // namespace pinfer::cli
