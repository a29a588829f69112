#include "engine/engine.h"

#include <algorithm>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/grammar_vocab.h"
#include "engine/logprobs.h"
#include "engine/param_error.h"

namespace pinfer {

Engine::Engine(const Model& model, EngineConfig config) : model_(model), config_(config) {}
Engine::~Engine() = default;

namespace {

// What the report says of the weights' pages.
std::string WeightsNote(const WeightResidency& w) {
  if (w.bytes == 0) return "";
  if (w.locked) return "locked in memory (--mlock)";
  const std::string repacked =
      w.repacked == 0 ? ""
                      : absl::StrCat(FormatBytes(w.repacked),
                                     " held by the CPU backend (repacked at load, their file pages "
                                     "released)");
  if (w.mapped == 0) return w.repacked > 0 ? repacked : "held by the model (repacked at load)";
  return absl::StrCat(repacked, repacked.empty() ? "" : "; ", FormatBytes(w.mapped),
                      " mapped from the model file: under memory pressure "
                      "the OS may drop these pages and read them back mid-conversation "
                      "(--mlock pins them)");
}

}  // namespace

// With sliding windows, the kv cache line's note: the blocks each layer group uses now
// against the ledger's split of the pool at max_concurrency sequences of max_model_len.
std::string Engine::KvGroupsNote(const OccupancyReport& kv) const {
  const std::vector<KvGroupLine>& planned = ledger_.kv_groups;
  if (ledger_.kv_layer_groups.empty() || kv.groups.size() != planned.size()) return "";
  std::string note =
      absl::StrCat("blocks in use by layer group (the ledger's split at ", ledger_.max_concurrency,
                   ledger_.max_concurrency == 1 ? " sequence): " : " sequences): ");
  for (size_t g = 0; g < planned.size(); ++g) {
    absl::StrAppend(&note, g ? ", " : "",
                    planned[g].window > 0 ? absl::StrCat("window ", planned[g].window)
                                          : std::string("full attention"),
                    " ", kv.groups[g].blocks_used, " (", planned[g].pool_blocks, ")");
  }
  absl::StrAppend(&note, ", spare (", ledger_.kv_blocks_spare, ")");
  return note;
}

StageRecord Engine::Stage(std::string_view name) const {
  const OccupancyReport kv = cache_->Report();
  const WeightResidency w = backend_->Weights();
  const bool host = ledger_.host;
  const uint64_t weights = host ? w.resident : ledger_.weights_bytes;
  // On the host the engine's logits rows are part of the workspace line.
  const uint64_t workspace =
      backend_->WorkspaceBytes() + (host ? logits_.size() * sizeof(float) : 0);
  const uint64_t kv_used = static_cast<uint64_t>(kv.blocks_used) * cache_->block_bytes();
  StageRecord r;
  r.stage = std::string(name);
  r.lines = {
      {std::string(kLineWeights), ledger_.weights_bytes, weights, weights, WeightsNote(w)},
      {std::string(kLineKvCache), ledger_.kv_pool_bytes, kv.bytes_reserved, kv_used,
       KvGroupsNote(kv)},
      {std::string(kLineWorkspace), ledger_.workspace_bytes, workspace, workspace, ""},
      {std::string(kLineReserve), ledger_.reserve_bytes, 0, 0, "an allowance"},
  };
  if (ledger_.graph_bytes > 0 || backend_->GraphBytes() > 0) {
    r.lines.push_back({std::string(kLineGraphs), ledger_.graph_bytes, backend_->GraphBytes(),
                       backend_->GraphBytes(), ""});
  }
  if (host) {
    r.process_bytes = process_bytes_;
    r.ledger_bytes = weights + kv.bytes_reserved + workspace;
  }
  r.rss_bytes = ResidentBytes().value_or(0);
  return r;
}

void Engine::RecordStages(const std::vector<ScheduledChunk>& chunks) {
  bool prefill = false, decode_only = true;
  for (const ScheduledChunk& c : chunks) {
    prefill |= !c.is_decode();
    decode_only &= c.is_decode();
  }
  if (prefill && !seen_prefill_) {
    seen_prefill_ = true;
    report_->Record(Stage(kStageFirstPrefill));
  }
  if (decode_only && !seen_decode_) {
    seen_decode_ = true;
    report_->Record(Stage(kStageDecoding));
  }
  if (scheduler_->num_running() > stats_.max_running || peak_.stage.empty()) {
    peak_ = Stage(kStagePeakConcurrency);
  }
}

MemoryReport Engine::memory_report() const {
  MemoryReport r = *report_;
  if (!peak_.stage.empty()) r.Record(peak_);
  return r;
}

absl::Status Engine::Validate(const GenerationRequest& req) const {
  const ModelConfig& mc = model_.config();
  if (req.prompt.empty()) {
    return InvalidParamError("prompt", "the prompt is empty: it needs at least one token (BOS)");
  }
  for (int32_t t : req.prompt) {
    if (t < 0 || t >= mc.n_vocab) {
      return InvalidParamError(
          "prompt", absl::StrCat("prompt token id ", t, " is outside the vocabulary (0..",
                                 mc.n_vocab - 1, ")"));
    }
  }
  if (absl::Status s = req.params.Validate(mc.n_vocab); !s.ok()) return s;
  const int64_t total = static_cast<int64_t>(req.prompt.size()) + req.params.max_tokens;
  if (total > config_.max_model_len) {
    return InvalidParamError(
        "max_tokens",
        absl::StrCat("the prompt has ", req.prompt.size(), " tokens and max_tokens is ",
                     req.params.max_tokens, ": ", total, " tokens exceed max_model_len ",
                     config_.max_model_len, "; shorten the prompt or lower max_tokens"));
  }
  if (req.n < 1 || req.n > config_.max_num_seqs) {
    return InvalidParamError("n",
                             absl::StrCat("n = ", req.n, " must be between 1 and max_num_seqs (",
                                          config_.max_num_seqs, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Engine::AddRequest(GenerationRequest req) {
  if (absl::Status s = Validate(req); !s.ok()) return s;
  if (scheduler_->num_waiting() >= config_.max_waiting) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the waiting queue is full (", config_.max_waiting, " requests); retry later"));
  }
  const int64_t rid = next_request_++;
  auto seq = std::make_unique<Sequence>();
  seq->id = next_seq_++;
  seq->request_id = rid;
  seq->tokens = std::move(req.prompt);
  seq->prompt_len = static_cast<int>(seq->tokens.size());
  seq->fork_pending = req.n - 1;
  seq->params = req.params;
  // No seed: a random one per request, kept so that its n completions differ from each other
  // the same way a seeded request's do.
  if (!seq->params.seed)
    seq->params.seed = std::random_device{}() ^ (static_cast<uint64_t>(rid) << 32);
  seq->sampler = std::make_unique<Sampler>(seq->params, seq->prompt_len);
  // The text continues the prompt's: the first piece keeps its leading space.
  seq->decoder = std::make_unique<StreamDecoder>(model_.tokenizer(), seq->tokens.back());
  if (req.grammar) {
    if (!grammar_vocab_) grammar_vocab_ = MakeGrammarVocabulary(model_.tokenizer());
    seq->matcher = std::make_unique<grammar::GrammarMatcher>(
        std::make_shared<grammar::GrammarAutomaton>(std::move(req.grammar), grammar_vocab_));
  }
  requests_[rid].push_back(seq->id);
  scheduler_->Enqueue(seq.get());
  seqs_[seq->id] = std::move(seq);
  return rid;
}

bool Engine::HasWork() const {
  return scheduler_->num_running() > 0 || scheduler_->num_waiting() > 0;
}

bool Engine::Cancel(int64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  for (SeqId id : it->second) {
    auto s = seqs_.find(id);
    if (s == seqs_.end()) continue;
    scheduler_->Remove(s->second.get());
    seqs_.erase(s);
  }
  requests_.erase(it);
  return true;
}

EngineStats Engine::stats() const {
  EngineStats s = stats_;
  s.preemptions = scheduler_->preemptions();
  s.running = scheduler_->num_running();
  s.waiting = scheduler_->num_waiting();
  s.kv_blocked = scheduler_->kv_blocked();
  std::set<int64_t> running;
  for (const Sequence* seq : scheduler_->running()) running.insert(seq->request_id);
  s.running_requests = static_cast<int>(running.size());
  s.waiting_requests = static_cast<int>(requests_.size()) - s.running_requests;
  return s;
}

SequenceOutput Engine::OutputFor(const Sequence& seq) const {
  SequenceOutput o;
  o.request_id = seq.request_id;
  o.index = seq.index;
  o.prompt_tokens = seq.prompt_len;
  o.output_tokens = seq.num_output();
  o.cached_prompt_tokens = seq.n_cached_prompt;
  o.admitted_step = seq.first_step;
  return o;
}

// Frees the sequence's blocks and forgets it (and its request once all its sequences are done).
void Engine::Finish(Sequence* seq, FinishReason reason) {
  seq->finish = reason;
  scheduler_->Remove(seq);
  ++stats_.finished;
  const int64_t rid = seq->request_id;
  const SeqId id = seq->id;
  auto req = requests_.find(rid);
  if (req != requests_.end()) {
    std::erase(req->second, id);
    if (req->second.empty() && seqs_.at(id)->fork_pending == 0) requests_.erase(req);
  }
  seqs_.erase(id);
}

// Appends the newly complete text, holding back any tail that could begin a stop string,
// and cuts the text at the first stop string found.
void Engine::EmitText(Sequence* seq, SequenceOutput* out) {
  size_t safe = seq->text.size();
  for (const std::string& stop : seq->params.stop) {
    if (stop.empty()) continue;
    const size_t from = seq->emitted > stop.size() ? seq->emitted - stop.size() : 0;
    if (size_t at = seq->text.find(stop, from); at != std::string::npos) {
      seq->text.resize(at);
      safe = at;
      seq->finish = FinishReason::kStop;
      break;
    }
    for (size_t keep = std::min(stop.size() - 1, seq->text.size()); keep > 0; --keep) {
      if (seq->text.compare(seq->text.size() - keep, keep, stop, 0, keep) == 0) {
        safe = std::min(safe, seq->text.size() - keep);
        break;
      }
    }
  }
  if (seq->finish != FinishReason::kNone || out->finished) safe = seq->text.size();
  if (safe > seq->emitted) {
    out->new_text = seq->text.substr(seq->emitted, safe - seq->emitted);
    seq->emitted = safe;
  }
}

std::span<const uint64_t> Engine::GrammarMask(Sequence* seq) {
  if (!seq->matcher) return {};
  mask_.resize(seq->matcher->mask_words());
  seq->matcher->FillMask(mask_);
  if (seq->params.ignore_eos && seq->matcher->CanContinue()) {
    for (int32_t id : grammar_vocab_->eog_ids()) mask_[id >> 6] &= ~(uint64_t{1} << (id & 63));
  }
  return mask_;
}

FinishReason Engine::GrammarFinish(const Sequence& seq) const {
  if (!seq.matcher) return FinishReason::kNone;
  // An end token the grammar took ends the sequence even under ignore_eos (GrammarMask
  // offers one there only when nothing else can come); so does a sentence that cannot go on.
  if (seq.matcher->IsFinished() || !seq.matcher->CanContinue()) return FinishReason::kStop;
  return FinishReason::kNone;
}

void Engine::Sample(Sequence* seq, const float* logits, SequenceOutput* out) {
  if (logits_observer_) {
    logits_observer_(seq->request_id, seq->index, logits, model_.config().n_vocab);
  }
  const int n_vocab = model_.config().n_vocab;
  const std::span<const uint64_t> allowed = GrammarMask(seq);
  if (!allowed.empty() &&
      std::all_of(allowed.begin(), allowed.end(), [](uint64_t w) { return w == 0; })) {
    // No token of this vocabulary continues the sentence: it ends here.
    seq->text += seq->decoder->Flush();
    out->finished = true;
    EmitText(seq, out);
    seq->finish = out->reason = FinishReason::kStop;
    out->output_tokens = seq->num_output();
    return;
  }
  const int32_t tok = seq->sampler->Sample(logits, n_vocab, seq->tokens, allowed);
  seq->tokens.push_back(tok);
  out->new_tokens.push_back(tok);
  if (seq->matcher) seq->matcher->AcceptToken(tok);  // allowed by the mask: always taken
  if (seq->params.logprobs >= 0) {
    out->logprobs.push_back(ComputeLogprobs(logits, n_vocab, tok, seq->params.logprobs));
  }
  ++stats_.generated_tokens;
  FinishReason reason = FinishReason::kNone;
  if (!seq->params.ignore_eos && model_.tokenizer().IsEndOfGeneration(tok)) {
    reason = FinishReason::kStop;
  } else {
    seq->text += seq->decoder->Push(tok);
    reason = GrammarFinish(*seq);
    if (reason == FinishReason::kNone && seq->num_output() >= seq->params.max_tokens) {
      reason = FinishReason::kLength;
    }
  }
  if (reason != FinishReason::kNone) {
    seq->text += seq->decoder->Flush();
    out->finished = true;
  }
  EmitText(seq, out);
  if (seq->finish == FinishReason::kStop) reason = FinishReason::kStop;  // a stop string
  if (reason != FinishReason::kNone) {
    seq->finish = reason;
    out->finished = true;
    out->reason = reason;
  }
  out->output_tokens = seq->num_output();
}

void Engine::ForkChildren(Sequence* parent, const float* logits,
                          std::vector<SequenceOutput>* outs) {
  for (int i = 1; i <= parent->fork_pending; ++i) {
    auto child = std::make_unique<Sequence>();
    child->id = next_seq_++;
    child->request_id = parent->request_id;
    child->index = i;
    // The prompt only: the parent has already appended its own first sampled token.
    child->tokens.assign(parent->tokens.begin(), parent->tokens.begin() + parent->n_computed);
    child->prompt_len = parent->prompt_len;
    child->params = parent->params;
    child->params.seed = parent->params.seed.value_or(0) + static_cast<uint64_t>(i);
    child->sampler = std::make_unique<Sampler>(child->params, child->prompt_len);
    child->decoder = std::make_unique<StreamDecoder>(model_.tokenizer(), child->tokens.back());
    if (parent->matcher) {  // the same grammar and caches, from its start
      child->matcher = std::make_unique<grammar::GrammarMatcher>(*parent->matcher);
      child->matcher->Reset();
    }
    child->first_step = parent->first_step;
    if (!scheduler_->Fork(parent, child.get()).ok()) {
      // Seats were reserved at admission, so this should not happen; if it does, the
      // completion ends at once (cancelled) rather than leaving its request waiting forever.
      SequenceOutput out = OutputFor(*child);
      out.finished = true;
      out.reason = FinishReason::kCancelled;
      outs->push_back(std::move(out));
      continue;
    }
    Sequence* c = child.get();
    requests_[parent->request_id].push_back(c->id);
    seqs_[c->id] = std::move(child);
    SequenceOutput out = OutputFor(*c);
    Sample(c, logits, &out);  // the parent's row: the sampler only reads it
    if (out.finished) Finish(c, out.reason);
    outs->push_back(std::move(out));
  }
  parent->fork_pending = 0;
}

// The step's batch: every chunk's tokens in order; rows[i] is the logits row of chunks[i]
// (-1 when it does not sample).
ForwardBatch Engine::BuildBatch(const std::vector<ScheduledChunk>& chunks, std::vector<int>* rows) {
  ForwardBatch batch;
  rows->assign(chunks.size(), -1);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ScheduledChunk& c = chunks[i];
    if (c.sample) (*rows)[i] = static_cast<int>(batch.logit_rows.size());
    for (int j = 0; j < c.count; ++j) {
      batch.Add(c.seq->tokens[c.start + j], c.start + j, c.seq->id, c.sample && j == c.count - 1);
    }
    if (c.seq->first_step < 0) c.seq->first_step = stats_.steps;
    if (!c.is_decode()) stats_.prefill_tokens += c.count;
    stats_.forwarded_tokens += c.count;
  }
  return batch;
}

absl::StatusOr<std::vector<SequenceOutput>> Engine::Step() {
  auto chunks = scheduler_->Schedule();
  if (!chunks.ok()) return chunks.status();
  std::vector<SequenceOutput> outs;
  if (chunks->empty()) return outs;
  std::vector<int> rows;
  const ForwardBatch batch = BuildBatch(*chunks, &rows);
  if (absl::Status s = backend_->Forward(batch, *cache_, logits_.data()); !s.ok()) return s;
  RecordStages(*chunks);
  if (step_observer_) step_observer_(*this);
  ++stats_.steps;
  stats_.max_running = std::max(stats_.max_running, scheduler_->num_running());
  scheduler_->MarkComputed(*chunks);
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  std::vector<Sequence*> finished;
  for (size_t i = 0; i < chunks->size(); ++i) {
    const ScheduledChunk& c = (*chunks)[i];
    Sequence* seq = c.seq;
    if (!c.sample) continue;
    const float* row = logits_.data() + static_cast<size_t>(rows[i]) * n_vocab;
    SequenceOutput out = OutputFor(*seq);
    const bool first = seq->num_output() == 0;
    Sample(seq, row, &out);
    const bool done = out.finished;
    outs.push_back(std::move(out));
    if (first && seq->fork_pending > 0) ForkChildren(seq, row, &outs);
    if (done) finished.push_back(seq);
  }
  for (Sequence* seq : finished) Finish(seq, seq->finish);
  return outs;
}

}  // namespace pinfer
