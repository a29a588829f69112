// The smallest use of the public Engine API: load a model, add two requests, step until
// both finish, print their text as it streams in, then the KV occupancy report.
//
//   build/generate MODEL.gguf "Once upon a time" "Tom and Lily"
#include <cstdio>
#include <map>
#include <string>

#include "engine/engine.h"
#include "engine/model/model.h"

using namespace pinfer;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPT [PROMPT...]\n", argv[0]);
    return 2;
  }
  auto model = Model::Load(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  EngineConfig config;  // paged f16 KV, pool sized by the memory ledger
  config.max_model_len = 512;
  auto engine = Engine::Create(**model, config);
  if (!engine.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  std::map<int64_t, std::string> text;
  for (int i = 2; i < argc; ++i) {
    GenerationRequest req;
    req.prompt = (*model)->tokenizer().Encode(argv[i], /*add_special=*/true);
    req.params.temperature = 0;
    req.params.max_tokens = 64;
    auto id = (*engine)->AddRequest(req);
    if (!id.ok()) {
      std::fprintf(stderr, "error: %s\n", std::string(id.status().message()).c_str());
      return 1;
    }
    text[*id] = argv[i];
  }
  while ((*engine)->HasWork()) {
    auto outputs = (*engine)->Step();  // one continuous-batching step for all requests
    if (!outputs.ok()) return 1;
    for (const SequenceOutput& o : *outputs) text[o.request_id] += o.new_text;
  }
  for (const auto& [id, t] : text) std::printf("[%ld] %s\n\n", (long)id, t.c_str());
  std::printf("%s", (*engine)->KvReport().ToText().c_str());
  return 0;
}
