// Cost of grammar-constrained sampling per step on a 128,256-token vocabulary (the size of
// llama3-8b's; engine/synth's generated pieces): the token mask in the states a JSON answer
// goes through, computed fresh (trie walk) and from the per-state cache, the mask applied to
// the logits, and the unconstrained sampler on the same logits for comparison; then the step
// itself: one engine decode step of a llama3-8b-shaped model cut to its first layer (every
// width and the 128,256-row output as the full model's, Q4_0, random weights: written once
// to $TMPDIR, about 0.7 GB), unconstrained and with the JSON schema's grammar. A full model's
// step runs 32 layers, so the constraint's share of this step bounds its share of a real one.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/engine.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/token_mask.h"
#include "engine/grammar/token_vocab.h"
#include "engine/grammar_vocab.h"
#include "engine/model/model.h"
#include "engine/sampler.h"
#include "engine/synth/synth.h"
#include "engine/synth/synth_data.h"
#include "loaders/tokenizer.h"

namespace {

using pinfer::grammar::GrammarAutomaton;
using pinfer::grammar::GrammarMatcher;
using pinfer::grammar::TokenVocabulary;

constexpr int kVocab = 128256;

const std::shared_ptr<const TokenVocabulary>& Vocab() {
  static const std::shared_ptr<const TokenVocabulary> v = [] {
    auto spec = pinfer::SynthVocabulary(kVocab);
    auto tok = pinfer::Tokenizer::Create(*spec);
    return pinfer::MakeGrammarVocabulary(**tok);
  }();
  return v;
}

std::shared_ptr<const pinfer::grammar::Grammar> SchemaGrammar() {
  static const auto g = [] {
    auto gbnf = pinfer::grammar::JsonSchemaTextToGbnf(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"},
      "mood": {"enum": ["happy", "sad", "sleepy"]},
      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4}},
      "required": ["name", "age", "mood", "tags"], "additionalProperties": false})");
    return *pinfer::grammar::CompileGrammar(*gbnf);
  }();
  return g;
}

// The answer's prefix at which each benchmark measures the mask.
const char* kPrefixes[] = {
    "",                                 // 0: before "{"
    "{\"name\": \"Lily and",            // 1: inside a free string (most tokens allowed)
    "{\"name\": \"Lily\", \"age\": 4",  // 2: inside an integer
    "{\"name\": \"Lily\", \"age\": 4, \"mood\": \"s",  // 3: inside an enum
};

GrammarMatcher MatcherAt(int prefix) {
  GrammarMatcher m(std::make_shared<GrammarAutomaton>(SchemaGrammar(), Vocab()));
  m.AcceptBytes(kPrefixes[prefix]);
  return m;
}

// A mask computed by walking the trie: a new automaton (empty caches) per iteration.
void BM_MaskFresh(benchmark::State& state) {
  std::vector<uint64_t> mask(Vocab()->mask_words());
  int64_t visited = 0, allowed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    GrammarMatcher m = MatcherAt(static_cast<int>(state.range(0)));
    state.ResumeTiming();
    m.FillMask(mask);
    benchmark::DoNotOptimize(mask.data());
    state.PauseTiming();
    visited = const_cast<GrammarAutomaton&>(m.automaton()).stats().trie_nodes_visited;
    allowed = 0;
    for (uint64_t w : mask) allowed += __builtin_popcountll(w);
    state.ResumeTiming();
  }
  state.counters["trie_nodes"] = static_cast<double>(visited);
  state.counters["allowed"] = static_cast<double>(allowed);
}
BENCHMARK(BM_MaskFresh)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

// The same state's mask again: from the per-state cache where the walk was long.
void BM_MaskCached(benchmark::State& state) {
  GrammarMatcher m = MatcherAt(static_cast<int>(state.range(0)));
  std::vector<uint64_t> mask(Vocab()->mask_words());
  m.FillMask(mask);
  for (auto _ : state) {
    m.FillMask(mask);
    benchmark::DoNotOptimize(mask.data());
  }
}
BENCHMARK(BM_MaskCached)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

std::vector<float> Logits() {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<float> l(kVocab);
  for (float& x : l) x = d(rng);
  return l;
}

// Masked logits set to -inf: what the sampler adds per constrained step (in a free string,
// /1, nearly every token is allowed; in an enum, /3, nearly none).
void BM_ApplyMask(benchmark::State& state) {
  GrammarMatcher m = MatcherAt(static_cast<int>(state.range(0)));
  std::vector<uint64_t> mask(Vocab()->mask_words());
  m.FillMask(mask);
  const std::vector<float> base = Logits();
  std::vector<float> l = base;
  for (auto _ : state) {
    pinfer::grammar::ApplyTokenMask(mask, l.data(), kVocab);
    benchmark::DoNotOptimize(l.data());
  }
}
BENCHMARK(BM_ApplyMask)->Arg(1)->Arg(3)->Unit(benchmark::kMicrosecond);

// The unconstrained sampler (temperature, top-k 40, top-p, min-p) on 128,256 logits.
void BM_SampleUnconstrained(benchmark::State& state) {
  pinfer::SamplingParams p;
  pinfer::Sampler sampler(p);
  const std::vector<float> base = Logits();
  std::vector<float> l;
  std::vector<int32_t> history = {1, 2, 3};
  for (auto _ : state) {
    state.PauseTiming();
    l = base;
    state.ResumeTiming();
    benchmark::DoNotOptimize(sampler.Sample(l.data(), kVocab, history));
  }
}
BENCHMARK(BM_SampleUnconstrained)->Unit(benchmark::kMicrosecond);

// A whole constrained answer: mask, pick the first allowed token of a fixed random order
// (a stand-in for sampling), advance; the mean per step with the caches as a request has them.
void BM_ConstrainedAnswerPerStep(benchmark::State& state) {
  std::vector<uint64_t> mask(Vocab()->mask_words());
  std::mt19937 rng(3);
  std::vector<int32_t> order(kVocab);
  for (int32_t i = 0; i < kVocab; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  int64_t steps = 0;
  for (auto _ : state) {
    GrammarMatcher m(std::make_shared<GrammarAutomaton>(SchemaGrammar(), Vocab()));
    for (int s = 0; s < 64 && m.CanContinue(); ++s) {
      m.FillMask(mask);
      for (int32_t id : order) {
        if ((mask[id >> 6] >> (id & 63)) & 1) {
          m.AcceptToken(id);
          break;
        }
      }
      ++steps;
    }
  }
  state.counters["steps"] =
      benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kAvgIterations);
  state.counters["s_per_step"] = benchmark::Counter(
      static_cast<double>(steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ConstrainedAnswerPerStep)->Unit(benchmark::kMillisecond);

// The llama3-8b-shaped model cut to one layer (see the top), loaded once; null when it could
// not be written or read (the step benchmarks then skip, saying why).
const pinfer::Model* OneLayerModel() {
  static const std::unique_ptr<pinfer::Model> model = []() -> std::unique_ptr<pinfer::Model> {
    const char* tmp = std::getenv("TMPDIR");
    const std::string path =
        std::string(tmp ? tmp : "/tmp") + "/pagedinfer-grammar-bench-llama3-8b-1layer-q4_0.gguf";
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "writing %s (once)\n", path.c_str());
      pinfer::SynthOptions o;
      o.n_layers = 1;
      absl::Status s = pinfer::WriteSynthModel("llama3-8b", "Q4_0", path + ".tmp", o);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
        return nullptr;
      }
      std::filesystem::rename(path + ".tmp", path);
    }
    auto m = pinfer::Model::Load(path);
    if (!m.ok()) std::fprintf(stderr, "%s\n", std::string(m.status().message()).c_str());
    return m.ok() ? std::move(*m) : nullptr;
  }();
  return model.get();
}

// One decode step (Engine::Step with one sequence decoding), without (0) and with (1) the
// schema's grammar on it. A request that ends is replaced, untimed (its prefill too).
void BM_DecodeStep(benchmark::State& state) {
  const pinfer::Model* model = OneLayerModel();
  if (model == nullptr) return state.SkipWithError("the one-layer llama3-8b model is missing");
  pinfer::EngineConfig c;
  c.max_model_len = 1024;
  c.max_num_seqs = 1;
  c.max_num_batched_tokens = 64;
  c.kv_cache_memory = 64ull << 20;
  auto engine = pinfer::Engine::Create(*model, c, nullptr, /*quiet=*/true);
  if (!engine.ok()) return state.SkipWithError(std::string(engine.status().message()).c_str());
  uint64_t seed = 1;
  auto restart = [&] {
    pinfer::GenerationRequest r;
    r.prompt = {model->tokenizer().bos(), 1000, 2000, 3000};
    r.params.seed = seed++;
    r.params.ignore_eos = true;
    r.params.max_tokens = 900;
    if (state.range(0) != 0) r.grammar = SchemaGrammar();
    if ((*engine)->AddRequest(std::move(r)).ok()) (void)(*engine)->Step();  // the prefill
  };
  int64_t steps = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (!(*engine)->HasWork()) restart();
    state.ResumeTiming();
    benchmark::DoNotOptimize((*engine)->Step());
    ++steps;
  }
  state.counters["steps"] = static_cast<double>(steps);
}
BENCHMARK(BM_DecodeStep)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(60);

}  // namespace
