// For each KV cache format: bytes per token and quality against f32 KV on a model's greedy
// run (the issue-3 table in README.md). Uses the public API: Model, Engine, CpuBackend and
// ScoreSequence.
//
//   build/kv_format_table MODEL.gguf [N_TOKENS]
//
// The f32-KV greedy run from BOS gives a token sequence; every format then scores that same
// sequence (teacher forcing) and is compared position by position with f32 KV: top-1
// agreement (argmax equal) and the largest absolute logit difference.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "engine/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "engine/eval/score.h"
#include "engine/model/model.h"

using namespace pinfer;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [N_TOKENS]\n", argv[0]);
    return 2;
  }
  const int n = argc > 2 ? std::atoi(argv[2]) : 200;
  auto model = Model::Load(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const Model& m = **model;
  // The reference run: greedy from BOS with f32 KV.
  EngineConfig cfg;
  cfg.kv_dtype = KvDtype::kF32;
  cfg.max_model_len = n + 1;
  cfg.max_num_seqs = 1;
  auto engine = Engine::Create(m, cfg, nullptr, /*quiet=*/true);
  if (!engine.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  GenerationRequest req;
  req.prompt = {m.tokenizer().bos()};
  req.params.temperature = 0;
  req.params.max_tokens = n;
  req.params.ignore_eos = true;
  std::vector<int32_t> seq = req.prompt;
  if (!(*engine)->AddRequest(req).ok()) return 1;
  while ((*engine)->HasWork()) {
    auto outs = (*engine)->Step();
    if (!outs.ok()) return 1;
    for (const SequenceOutput& o : *outs)
      seq.insert(seq.end(), o.new_tokens.begin(), o.new_tokens.end());
  }
  seq.pop_back();  // score the n positions that predicted the n generated tokens
  CpuBackend backend(m, 256, 0);
  const int v = m.config().n_vocab;
  auto ref = ScoreSequence(m, backend, KvDtype::kF32, seq, 256);
  if (!ref.ok()) return 1;
  std::printf("| KV format | bytes/token | top-1 agreement | largest logit difference |\n");
  std::printf("|---|---|---|---|\n");
  for (KvDtype d : kAllKvDtypes) {
    auto row = KvRowBytes(d, m.config().kv_dim());
    if (!row.ok()) {
      std::printf("| %s | n/a | (%s) | |\n", std::string(KvDtypeName(d)).c_str(),
                  std::string(row.status().message()).c_str());
      continue;
    }
    auto got = ScoreSequence(m, backend, d, seq, 256);
    if (!got.ok()) return 1;
    int agree = 0;
    double max_diff = 0;
    for (size_t i = 0; i < seq.size(); ++i) {
      const float* a = ref->data() + i * v;
      const float* b = got->data() + i * v;
      int ia = 0, ib = 0;
      for (int j = 0; j < v; ++j) {
        if (a[j] > a[ia]) ia = j;
        if (b[j] > b[ib]) ib = j;
        max_diff = std::max(max_diff, (double)std::fabs(a[j] - b[j]));
      }
      agree += ia == ib;
    }
    std::printf("| %s | %zu | %d/%zu (%.1f%%) | %.4g |\n", std::string(KvDtypeName(d)).c_str(),
                2 * m.config().n_layers * *row, agree, seq.size(), 100.0 * agree / seq.size(),
                max_diff);
  }
  return 0;
}
