// Tokenizer throughput (bytes of text encoded per second) for the Llama-2 tokenizer.json
// (32,000 pieces, byte fallback) and the Llama-3-style byte-level BPE of ../shared/models.
// Models are found under $PAGEDINFER_MODELS, else a shared/models folder above the cwd.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "benchmark/benchmark.h"
#include "loaders/hf_tokenizer.h"
#include "loaders/tokenizer.h"

namespace {

std::string ModelFile(const std::string& relative) {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("PAGEDINFER_MODELS")) {
    return fs::exists(fs::path(env) / relative) ? (fs::path(env) / relative).string() : "";
  }
  for (fs::path dir = fs::current_path(); !dir.empty(); dir = dir.parent_path()) {
    const fs::path p = dir / "shared" / "models" / relative;
    if (fs::exists(p)) return p.string();
    if (dir == dir.parent_path()) break;
  }
  return "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// About 256 KiB of story-like English with numbers, punctuation, newlines and some
// non-ASCII text, the same for every run.
const std::string& Corpus() {
  static const std::string text = [] {
    const char* lines[] = {
        "Once upon a time, there was a little girl named Lily. She loved to play outside. ",
        "One day, she saw a big, red ball in the park; it cost $12.50 in 2024!\n",
        "\"I can't find it,\" she said. Her mom replied: \"Let's look together.\"\n\n",
        "Café, naïve, Ελλάδα, 中文 and emoji 😀 appear now and then.    Indented text.\n",
        "The quick brown fox jumps over the lazy dog 1234567890 times.\n"};
    std::string s;
    for (int i = 0; s.size() < (256u << 10); ++i) s += lines[(i * 7 + i / 5) % 5];
    return s;
  }();
  return text;
}

void EncodeBench(benchmark::State& state, const char* json_rel, const char* config_rel) {
  const std::string json = ModelFile(json_rel);
  if (json.empty()) {
    state.SkipWithError("tokenizer fixture not found (set PAGEDINFER_MODELS)");
    return;
  }
  const std::string cfg = config_rel ? ModelFile(config_rel) : "";
  auto spec = pinfer::TokenizerSpecFromHfFiles(ReadFile(json), cfg.empty() ? "" : ReadFile(cfg));
  if (!spec.ok()) {
    state.SkipWithError(std::string(spec.status().message()).c_str());
    return;
  }
  auto tok = pinfer::Tokenizer::Create(*std::move(spec));
  if (!tok.ok()) {
    state.SkipWithError(std::string(tok.status().message()).c_str());
    return;
  }
  const std::string& text = Corpus();
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = (*tok)->Encode(text, true);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / n_tokens;
}

void BM_EncodeLlama2Json(benchmark::State& state) {
  EncodeBench(state, "hf/tiny-random-llama-f32/tokenizer.json",
              "hf/tiny-random-llama-f32/tokenizer_config.json");
}
void BM_EncodeLlama3StyleBpe(benchmark::State& state) {
  EncodeBench(state, "tokenizers/llama3-style-bpe2k/tokenizer.json", nullptr);
}

BENCHMARK(BM_EncodeLlama2Json)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeLlama3StyleBpe)->Unit(benchmark::kMillisecond);

}  // namespace
