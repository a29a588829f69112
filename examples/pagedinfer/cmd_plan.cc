// pagedinfer plan: the memory ledger for a model and engine settings, before loading anything.
// It calls the same ComputeLedger the engine calls at start, so for the same settings it
// prints the bytes `run`/`serve` reserve.
#include <cstdio>
#include <string>

#include "absl/strings/str_join.h"
#include "engine/cpu/repack.h"
#include "engine/memory/memory_ledger.h"
#include "engine/memory/model_plan.h"
#include "engine/memory/system_memory.h"
#include "engine/model/model_shapes.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/engine_flags.h"
#include "kvcache/kv_cache.h"

namespace pinfer::cli {
namespace {

// The engine's flags (EngineFlags::Register, as run, chat and serve take them; plan's own
// defaults: --device cuda, --reserve by device) and plan's: --shape, --type, --memory, --json.
struct PlanFlags {
  EngineFlags engine;
  std::string shape, type = "Q4_K_M", memory;
  LedgerOptions o;
  bool json = false;

  void Register(Args& args) {
    engine.device = "cuda";  // plan cannot see a GPU; it plans for one unless told cpu
    engine.reserve = "";     // by --device: 1GiB on cuda, 64MiB on cpu
    engine.Register(args);
    args.Add("--shape", &shape,
             "named shape instead of a file: " + absl::StrJoin(NamedShapeNames(), ", "));
    args.Add("--type", &type, "file type with --shape (Q4_0, Q4_K_M, Q8_0, F16, ...)");
    args.Add("--memory", &memory,
             "memory the engine may use in all (e.g. 16GiB); default on --device cpu: "
             "--memory-utilization of the memory available here, as the engine does");
    args.AddSwitch("--json", &json, "print JSON instead of a table");
  }

  // The ledger's options from the flags: the budget (--memory, or the host's available
  // memory on --device cpu), the pool, the reserve and the KV format and layout.
  absl::Status Resolve() {
    if (engine.model.empty() == shape.empty()) {
      return absl::InvalidArgumentError("give either -m FILE or --shape NAME (see --help)");
    }
    const std::string& device = engine.device;
    if (device != "cuda" && device != "cpu" && device != "auto") {
      return absl::InvalidArgumentError("--device must be cuda or cpu, not '" + device + "'");
    }
    // auto and -ngl other than 0: a GPU, which plan cannot see (so it needs --memory).
    o.host = device == "cpu" || engine.n_gpu_layers == 0;
    const std::string reserve = !engine.reserve.empty() ? engine.reserve
                                : o.host                ? "64MiB"
                                                        : "1GiB";
    absl::StatusOr<uint64_t> reserve_bytes = ParseBytes(reserve);
    if (!reserve_bytes.ok()) return reserve_bytes.status();
    o.reserve_bytes = *reserve_bytes;
    absl::StatusOr<KvDtype> kv_dtype = ParseKvDtype(engine.kv_dtype);
    if (!kv_dtype.ok()) return kv_dtype.status();
    o.kv_dtype = *kv_dtype;
    absl::StatusOr<KvLayout> kv_layout = ParseKvLayout(engine.kv_layout);
    if (!kv_layout.ok()) return kv_layout.status();
    o.kv_layout = *kv_layout;
    o.block_size = engine.block_size;
    o.max_model_len = engine.max_model_len;
    o.max_num_seqs = engine.max_num_seqs;
    o.max_num_batched_tokens = engine.max_num_batched_tokens;
    o.threads = engine.threads;
    o.memory_utilization = engine.memory_utilization;
    if (!engine.kv_cache_memory.empty()) {
      absl::StatusOr<uint64_t> pool = ParseBytes(engine.kv_cache_memory);
      if (!pool.ok()) return pool.status();
      o.kv_cache_memory = *pool;
    }
    return ResolveMemory();
  }

  // The contiguous layout's block is a whole sequence: max_model_len slots, as the engine
  // sizes it (max_model_len resolved from the model when not given).
  void ResolveBlockSlots(const ModelConfig& c) {
    const int len = o.max_model_len > 0 ? static_cast<int>(o.max_model_len)
                                        : DefaultMaxModelLen(c.context_length);
    o.block_size = KvBlockSlots(o.kv_layout, o.block_size, len);
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

// The model's (or shape's) input to the ledger. For a model file on the CPU the weights line
// counts what the CPU backend holds after repacking (engine/cpu/repack.h: the same rule and
// kernel set as the engine's, unless --no-repack). A named shape counts the file's layout:
// repacking adds only the padding of a last partial group of 8 rows, none where every matrix's
// rows are a multiple of 8 (the named shapes' widths are).
absl::StatusOr<PlanInput> PlanInputFor(const PlanFlags& f) {
  if (f.engine.model.empty()) return PlanInputFromShape(f.shape, f.type);
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(f.engine.model);
  if (!model.ok()) return model.status();
  absl::StatusOr<PlanInput> input = PlanInputFromModel(**model);
  if (input.ok() && f.o.host && !f.engine.no_repack) {
    AccountRepack(PlanRepack(**model, ActiveKernelSet()), &*input);
  }
  return input;
}

}  // namespace

int PlanMain(int argc, char** argv) {
  PlanFlags f;
  Args args("plan",
            "pagedinfer plan (--shape NAME --type TYPE | -m FILE) [--memory BYTES] [options]\n"
            "Prints the memory ledger: weights, KV bytes per token, workspace, reserve, and the\n"
            "KV pool. Exit status 1 when the configuration does not fit. Takes the engine's\n"
            "flags as run and serve do; --device is cuda (the default, also for auto: plan\n"
            "cannot see a GPU, so give --memory; reserve 1GiB) or cpu (reserve 64MiB).",
            {"pagedinfer plan --shape llama2-7b --type Q4_0 --memory 16GiB --kv-dtype f16",
             "pagedinfer plan --shape mistral-7b --type Q4_K_M --memory 8GiB --max-model-len "
             "32768 --json",
             "pagedinfer plan -m model.gguf --device cpu --kv-cache-memory 4GiB -t 8"});
  f.Register(args);
  if (int rc = ParseOrExit(args, argc, argv); rc >= 0) return rc;
  if (absl::Status s = f.Resolve(); !s.ok()) return Fail(s, 2);
  absl::StatusOr<PlanInput> input = PlanInputFor(f);
  if (!input.ok()) return Fail(input.status(), 2);
  f.ResolveBlockSlots(input->config);
  absl::StatusOr<MemoryLedger> ledger = ComputeLedger(*input, f.o);
  if (!ledger.ok()) return Fail(ledger.status(), 2);
  std::string out = f.json ? ledger->ToJson() + "\n" : ledger->ToText();
  std::fputs(out.c_str(), stdout);
  return ledger->fits ? 0 : 1;
}

}  // namespace pinfer::cli
