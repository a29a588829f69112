// Engine::Create in named steps, in the order they run:
//   1. resolve the limits (defaults filled in, impossible ones refused);
//   2. build the backend (the CPU's when none is given) and give it the limits;
//   3. compute the ledger (ComputeLedger, the one function `plan` and the report use too):
//      the pool is --kv-cache-memory, or on the CPU max_num_seqs sequences of max_model_len
//      capped by the budget, on a device all the budget leaves (as vLLM); refuse to start,
//      with the ledger's message, when it does not fit;
//   4. commit the memory: the backend's (the CPU's weights repacked unless --no-repack, their
//      file pages released; weights paged in, workspace written, locked with --mlock), then
//      the process's own memory is measured once;
//   5. create the KV cache (its pool committed, in the backend's storage) and the scheduler;
//   6. announce the pool and start the memory report;
//   7. warm up: one token through the model, then capture CUDA graphs (unless eager).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/build_info.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/repack.h"
#include "engine/engine.h"
#include "engine/memory/memory_ledger.h"
#include "engine/memory/model_plan.h"
#include "engine/memory/system_memory.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

// Step 1. Fills in max_model_len (DefaultMaxModelLen: the model's context length, at most
// 4096) and refuses
// batch limits the scheduler cannot work with.
absl::Status ResolveLimits(const ModelConfig& mc, EngineConfig* config) {
  if (config->max_model_len <= 0) config->max_model_len = DefaultMaxModelLen(mc.context_length);
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
    backend = std::make_unique<CpuBackend>(model, config.max_num_batched_tokens, config.threads,
                                           config.repack);
  }
  if (absl::Status s =
          backend->ReserveForLimits(config.max_num_seqs, config.max_model_len, BlockSlots(config));
      !s.ok()) {
    return s;
  }
  return backend;
}

// The ledger's options: the engine's limits, the device and the memory it has (the device's
// free memory as the backend measured it, or the host's available RAM now).
absl::StatusOr<LedgerOptions> LedgerOptionsFor(const EngineConfig& config, const Backend& backend) {
  LedgerOptions opt;
  opt.kv_dtype = config.kv_dtype;
  opt.kv_layout = config.kv_layout;
  opt.block_size = BlockSlots(config);
  opt.max_model_len = config.max_model_len;
  opt.max_num_seqs = config.max_num_seqs;
  opt.max_num_batched_tokens = config.max_num_batched_tokens;
  opt.host = backend.DetectedMemory() == 0;
  opt.threads = config.threads;
  opt.reserve_bytes = std::max(config.reserve_bytes, backend.MeasuredReserve());
  // A device backend's step buffers are measured, not bounded: the line takes the larger.
  if (!opt.host) opt.workspace_floor_bytes = backend.WorkspaceBytes();
  // CUDA graphs are captured after the KV pool exists (they point into it), so their memory
  // is set aside here, before the pool is sized, from the backend's estimate; the measured
  // figure is what the memory report shows for the line.
  if (!config.enforce_eager) opt.graph_bytes = backend.GraphReserveBytes(config.max_num_seqs);
  opt.memory_utilization = config.memory_utilization;
  opt.kv_cache_memory = config.kv_cache_memory;
  if (opt.host) {
    absl::StatusOr<AvailableMemory> available = AvailableHostMemory();
    if (!available.ok()) return available.status();
    opt.available_bytes = available->bytes;
    opt.available_source = available->source;
  } else {
    opt.available_bytes = backend.DetectedMemory();
    opt.available_source = "free device memory";
  }
  opt.budget_option = "the budget (--memory-utilization x available memory)";
  return opt;
}

// Step 3. The ledger for the model under the engine's limits; ResourceExhausted with its
// message when the configuration does not fit.
absl::StatusOr<MemoryLedger> ComputeEngineLedger(const Model& model, const EngineConfig& config,
                                                 const Backend& backend) {
  auto input = PlanInputFromModel(model);
  if (!input.ok()) return input.status();
  // The CPU backend's repacked matrices are its weights (`plan` applies the same rule).
  if (const auto* cpu = dynamic_cast<const CpuBackend*>(&backend); cpu != nullptr) {
    AccountRepack(cpu->repack_plan(), &*input);
  }
  auto opt = LedgerOptionsFor(config, backend);
  if (!opt.ok()) return opt.status();
  auto ledger = ComputeLedger(*input, *opt);
  if (!ledger.ok()) return ledger.status();
  if (!ledger->fits) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "refusing to start: ", ledger->message,
        ledger->budget_source.empty() ? ""
                                      : absl::StrCat(" (Budget: ", ledger->budget_source, ".)")));
  }
  return ledger;
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
  std::unique_ptr<Engine> e(new Engine(model, config));
  e->ledger_ = *std::move(ledger);
  e->backend_ = *std::move(built);
  if (absl::Status s = e->CommitMemory(); !s.ok()) return s;
  if (absl::Status s = e->CreateCacheAndScheduler(); !s.ok()) return s;
  e->AnnouncePool(quiet);
  e->StartMemoryReport();
  if (absl::Status s = e->WarmUp(quiet); !s.ok()) return s;
  return e;
}

// Step 4. The backend commits its memory (locked with --mlock); what the process holds
// beside it (binary, libraries, heap) is then measured, once: the resident set less the
// weights' resident pages and the workspace.
absl::Status Engine::CommitMemory() {
  if (absl::Status s = backend_->Commit(config_.mlock); !s.ok()) return s;
  if (!ledger_.host) return absl::OkStatus();
  const uint64_t rss = ResidentBytes().value_or(0);
  const uint64_t counted = backend_->Weights().resident + backend_->WorkspaceBytes();
  process_bytes_ = rss > counted ? rss - counted : 0;
  return absl::OkStatus();
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
  kc.prefix_caching = config_.prefix_caching && config_.kv_layout == KvLayout::kPaged;
  kc.num_blocks = ledger_.kv_pool_blocks;
  auto storage = backend_->MakeKvStorage(ledger_.kv_bytes_per_block, ledger_.kv_pool_blocks);
  if (!storage.ok()) return storage.status();
  if (*storage) storage_summary_ = (*storage)->Describe();
  auto cache = KvCache::Create(kc, *std::move(storage));
  if (!cache.ok()) return cache.status();
  cache_ = *std::move(cache);
  if (cache_->block_bytes() != ledger_.kv_bytes_per_block) {  // one rule: KvBlockBytes
    return absl::InternalError(absl::StrCat("the KV cache's blocks are ", cache_->block_bytes(),
                                            " bytes but the ledger sized the pool for ",
                                            ledger_.kv_bytes_per_block));
  }
  scheduler_ = std::make_unique<Scheduler>(
      SchedulerConfig{config_.max_num_seqs, config_.max_num_batched_tokens,
                      config_.admission_headroom},
      *cache_);
  // A step samples at most one row per running sequence (the ledger's "logits" part).
  const size_t rows =
      static_cast<size_t>(std::min(config_.max_num_seqs, config_.max_num_batched_tokens));
  logits_.resize(rows * static_cast<size_t>(mc.n_vocab));
  return absl::OkStatus();
}

// Step 6a. The pool's line (tokens, blocks, the bound that sized it, how it was committed,
// concurrency at max_model_len) and the backend's, printed unless quiet.
void Engine::AnnouncePool(bool quiet) {
  const int64_t seqs = ledger_.max_concurrency;
  pool_summary_ = absl::StrFormat(
      "KV pool: %d tokens in %d blocks of %d (%s, %s %s), %s%s; max_model_len %d fits %d "
      "sequence%s at once",
      ledger_.kv_pool_tokens, ledger_.kv_pool_blocks, cache_->block_size(),
      FormatBytes(ledger_.kv_pool_bytes), Sv(KvDtypeName(config_.kv_dtype)),
      Sv(KvLayoutName(config_.kv_layout)), ledger_.PoolBoundText(),
      storage_summary_.empty() ? "" : absl::StrCat("; ", storage_summary_), config_.max_model_len,
      seqs, seqs == 1 ? "" : "s");
  if (!ledger_.kv_layer_groups.empty()) {
    absl::StrAppendFormat(&pool_summary_,
                          "\nKV layer groups: %s; a sequence holds at most %d blocks (%d with "
                          "the windows ignored)",
                          ledger_.kv_layer_groups, ledger_.blocks_per_sequence,
                          ledger_.blocks_per_sequence_full);
  }
  if (const std::string committed = backend_->CommitSummary(); !committed.empty()) {
    absl::StrAppend(&pool_summary_, "\nmemory: ", committed);
    if (const uint64_t rss = ResidentBytes().value_or(0); rss > 0) {
      absl::StrAppend(&pool_summary_, "; the process holds ", FormatBytes(rss), " resident");
    }
  }
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
  report_->Record(Stage(kStageAfterLoad));
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
  report_->Record(Stage(kStageWarmUp));
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
