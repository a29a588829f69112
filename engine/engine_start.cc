// Engine::Create in named steps, in the order they run:
//   1. resolve the limits (defaults filled in, impossible ones refused);
//   2. build the backend (the CPU's when none is given) and let it reserve for the limits;
//   3. compute the ledger: weights, workspace, reserve and graphs off the budget, the KV pool
//      is the rest (refusing to start when one max_model_len sequence cannot fit);
//   4. size the pool: without an explicit pool size, no more blocks than max_num_seqs
//      sequences of max_model_len can use;
//   5. create the KV cache (in the backend's storage) and the scheduler;
//   6. announce the pool and start the memory report;
//   7. warm up: one token through the model, then capture CUDA graphs (unless eager).
#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/build_info.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "engine/memory/memory_ledger.h"
#include "engine/memory/model_plan.h"
#include "engine/memory/system_memory.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

// Step 1. Fills in max_model_len (the model's context length, at most 4096) and refuses
// batch limits the scheduler cannot work with.
absl::Status ResolveLimits(const ModelConfig& mc, EngineConfig* config) {
  if (config->max_model_len <= 0) config->max_model_len = std::min(mc.context_length, 4096);
  if (config->max_num_seqs < 1 || config->max_num_batched_tokens < config->max_num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_num_batched_tokens (", config->max_num_batched_tokens,
        ") must be at least max_num_seqs (", config->max_num_seqs, "), which must be at least 1"));
  }
  if (config->admission_headroom < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "admission_headroom is ", config->admission_headroom,
        "; it counts tokens of growth per running sequence, 0 or more (0 turns it off)"));
  }
  return absl::OkStatus();
}

// Slots per KV block: the contiguous layout's one block per sequence holds max_model_len.
int BlockSlots(const EngineConfig& config) {
  return KvBlockSlots(config.kv_layout, config.block_size, config.max_model_len);
}

// Step 2. The given backend, or the CPU's, holding its buffers for the engine's limits.
absl::StatusOr<std::unique_ptr<Backend>> BuildBackend(const Model& model,
                                                      const EngineConfig& config,
                                                      std::unique_ptr<Backend> backend) {
  if (!backend) {
    backend = std::make_unique<CpuBackend>(model, config.max_num_batched_tokens, config.threads);
  }
  if (absl::Status s =
          backend->ReserveForLimits(config.max_num_seqs, config.max_model_len, BlockSlots(config));
      !s.ok()) {
    return s;
  }
  return backend;
}

// The ledger's options: the engine's limits and what the backend measured.
LedgerOptions LedgerOptionsFor(const EngineConfig& config, const Backend& backend) {
  LedgerOptions opt;
  opt.kv_dtype = config.kv_dtype;
  opt.block_size = BlockSlots(config);
  opt.max_model_len = config.max_model_len;
  opt.max_num_seqs = config.max_num_seqs;
  opt.max_num_batched_tokens = config.max_num_batched_tokens;
  opt.reserve_bytes = std::max(config.reserve_bytes, backend.MeasuredReserve());
  // A device backend's step buffers are measured, not bounded: the line takes the larger.
  if (backend.DetectedMemory() > 0) opt.workspace_floor_bytes = backend.WorkspaceBytes();
  // CUDA graphs are captured after the KV pool exists (they point into it), so their memory
  // is set aside here, before the pool is sized, from the backend's estimate; the measured
  // figure is what the memory report shows for the line.
  if (!config.enforce_eager) opt.graph_bytes = backend.GraphReserveBytes(config.max_num_seqs);
  opt.budget_option = config.kv_cache_memory > 0
                          ? "the budget (weights + workspace + reserve + --kv-cache-memory)"
                          : "the budget (--memory-utilization x detected memory)";
  return opt;
}

// Without --kv-cache-memory the budget is memory_utilization of the detected memory (the
// device's, or available RAM for a host backend); *source says so for the refusal message.
absl::Status SetBudget(const EngineConfig& config, const Backend& backend, LedgerOptions* opt,
                       std::string* source) {
  if (config.kv_cache_memory > 0) {
    opt->budget_bytes = 0;  // the pool is given directly
    return absl::OkStatus();
  }
  if (!(config.memory_utilization > 0 && config.memory_utilization <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory utilization ", config.memory_utilization, " must be in (0, 1]"));
  }
  const uint64_t device = backend.DetectedMemory();
  const uint64_t detected = device > 0 ? device : AvailableHostMemory();
  opt->budget_bytes = static_cast<uint64_t>(detected * config.memory_utilization);
  *source = absl::StrFormat("%.2f of %s %s", config.memory_utilization, FormatBytes(detected),
                            device > 0 ? "free device memory" : "available RAM");
  return absl::OkStatus();
}

// Step 3. The ledger for the model under the engine's limits; ResourceExhausted (naming the
// budget) when one max_model_len sequence does not fit.
absl::StatusOr<MemoryLedger> ComputeEngineLedger(const Model& model, const EngineConfig& config,
                                                 const Backend& backend) {
  auto input = PlanInputFromModel(model);
  if (!input.ok()) return input.status();
  LedgerOptions opt = LedgerOptionsFor(config, backend);
  std::string budget_source;
  if (absl::Status s = SetBudget(config, backend, &opt, &budget_source); !s.ok()) return s;
  auto ledger = config.kv_cache_memory > 0
                    ? ComputeLedgerForPool(*input, opt, config.kv_cache_memory)
                    : ComputeLedger(*input, opt);
  if (!ledger.ok()) return ledger.status();
  if (!ledger->fits) {
    return absl::ResourceExhaustedError(
        absl::StrCat("refusing to start: ", ledger->message,
                     budget_source.empty() ? "" : absl::StrCat(" (Budget: ", budget_source, ".)")));
  }
  return ledger;
}

// Step 4. Without an explicit pool size, never reserve more blocks than max_num_seqs
// sequences of max_model_len can use: on the CPU the rest of the budget stays free for
// everything else.
void SizePool(const EngineConfig& config, MemoryLedger* ledger) {
  if (config.kv_cache_memory > 0) return;
  const int64_t useful = ledger->blocks_per_sequence * config.max_num_seqs;
  if (ledger->kv_pool_blocks <= useful) return;
  ledger->kv_pool_blocks = useful;
  ledger->kv_pool_tokens = useful * BlockSlots(config);
  ledger->kv_pool_bytes = static_cast<uint64_t>(useful) * ledger->kv_bytes_per_block;
  ledger->max_concurrency = config.max_num_seqs;
  ledger->max_model_len_fit = ledger->kv_pool_tokens;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const Model& model, EngineConfig config,
                                                       std::unique_ptr<Backend> backend,
                                                       bool quiet) {
  if (absl::Status s = ResolveLimits(model.config(), &config); !s.ok()) return s;
  auto built = BuildBackend(model, config, std::move(backend));
  if (!built.ok()) return built.status();
  auto ledger = ComputeEngineLedger(model, config, **built);
  if (!ledger.ok()) return ledger.status();
  SizePool(config, &*ledger);
  std::unique_ptr<Engine> e(new Engine(model, config));
  e->ledger_ = *std::move(ledger);
  e->backend_ = *std::move(built);
  if (absl::Status s = e->CreateCacheAndScheduler(); !s.ok()) return s;
  e->AnnouncePool(quiet);
  e->StartMemoryReport();
  if (absl::Status s = e->WarmUp(quiet); !s.ok()) return s;
  return e;
}

// Step 5. The KV cache of the ledger's pool, in the backend's storage, and the scheduler
// over it; the logits buffer for a full step.
absl::Status Engine::CreateCacheAndScheduler() {
  const ModelConfig& mc = model_.config();
  KvCacheConfig kc = KvCacheConfigFor(mc, config_.kv_dtype);
  kc.layout = config_.kv_layout;
  kc.block_size = config_.block_size;
  kc.max_model_len = config_.max_model_len;
  kc.max_num_seqs = config_.max_num_seqs;
  kc.num_blocks = ledger_.kv_pool_blocks;
  kc.prefix_caching = config_.prefix_caching && config_.kv_layout == KvLayout::kPaged;
  auto storage = backend_->MakeKvStorage(ledger_.kv_bytes_per_block, ledger_.kv_pool_blocks);
  if (!storage.ok()) return storage.status();
  auto cache = KvCache::Create(kc, *std::move(storage));
  if (!cache.ok()) return cache.status();
  cache_ = *std::move(cache);
  scheduler_ = std::make_unique<Scheduler>(
      SchedulerConfig{config_.max_num_seqs, config_.max_num_batched_tokens,
                      config_.admission_headroom},
      *cache_);
  logits_.resize(static_cast<size_t>(config_.max_num_batched_tokens) * mc.n_vocab);
  return absl::OkStatus();
}

// Step 6a. The pool's one line (tokens, blocks, concurrency at max_model_len), printed unless
// quiet.
void Engine::AnnouncePool(bool quiet) {
  pool_summary_ = absl::StrFormat(
      "KV pool: %d tokens in %d blocks of %d (%s, %s %s); max_model_len %d fits %d sequences "
      "at once",
      ledger_.kv_pool_tokens, ledger_.kv_pool_blocks, cache_->block_size(),
      FormatBytes(ledger_.kv_pool_bytes), Sv(KvDtypeName(config_.kv_dtype)),
      Sv(KvLayoutName(config_.kv_layout)), config_.max_model_len, ledger_.max_concurrency);
  if (!quiet) std::fprintf(stderr, "%s\n", pool_summary_.c_str());
}

// Step 6b. The memory report's header and its first stage (after load).
void Engine::StartMemoryReport() {
  const ModelConfig& mc = model_.config();
  MemoryReportHeader header;
  header.model = mc.name.empty() ? model_.path() : mc.name;
  header.weight_format = model_.WeightFormat();
  header.kv_format = std::string(KvDtypeName(config_.kv_dtype));
  header.cache_layout =
      config_.kv_layout == KvLayout::kPaged
          ? absl::StrCat("paged (blocks of ", config_.block_size, " tokens)")
          : absl::StrCat("contiguous (", config_.max_model_len, " slots per sequence)");
  header.device = backend_->name();
  header.version = BuildInfo();
  report_ = std::make_unique<MemoryReport>(header);
  report_->Record(kStageAfterLoad, LineUsages());
}

// Step 7. One token through a scratch sequence, so buffers are touched before the first
// request; then the CUDA graphs (unless eager), and the memory report's warm-up stage.
absl::Status Engine::WarmUp(bool quiet) {
  if (absl::Status s = ForwardScratchToken(); !s.ok()) return s;
  if (!config_.enforce_eager) {
    if (absl::Status s = backend_->CaptureGraphs(*cache_, config_.max_num_seqs); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(s.message(),
                                                 "; or start with --enforce-eager to run every "
                                                 "step without CUDA graphs"));
    }
    const uint64_t took = backend_->GraphBytes();
    if (!quiet && took > ledger_.graph_bytes) {
      std::fprintf(stderr,
                   "warning: CUDA graphs took %s of device memory, more than the %s the ledger set "
                   "aside for them\n",
                   FormatBytes(took).c_str(), FormatBytes(ledger_.graph_bytes).c_str());
    }
  }
  report_->Record(kStageWarmUp, LineUsages());
  return absl::OkStatus();
}

absl::Status Engine::ForwardScratchToken() {
  const SeqId scratch = -1;
  const int32_t tok = std::max(0, model_.tokenizer().bos());
  if (absl::Status s = cache_->AddSequence(scratch); !s.ok()) return s;
  absl::Status s = cache_->Append(scratch, 1);
  if (s.ok()) {
    ForwardBatch batch;
    batch.Add(tok, 0, scratch, true);
    s = backend_->Forward(batch, *cache_, logits_.data());
  }
  cache_->Free(scratch);
  return s;
}

}  // namespace pinfer
