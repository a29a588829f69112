// pagedinfer inspect: what a model file holds and what each KV format costs per token.
#include <cstdio>

#include "absl/strings/str_format.h"
#include "engine/model/architecture.h"
#include "engine/model/model.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"
#include "kvcache/kv_dtype.h"
#include "loaders/absl_compat.h"
#include "loaders/gguf.h"
#include "nlohmann/json.hpp"

namespace pinfer::cli {

namespace {

// What inspect reports, as JSON: the model's shape, its tensors by storage type, the
// tokenizer, and each KV format's bytes per token.
nlohmann::json Describe(const Model& m) {
  const ModelConfig& c = m.config();
  nlohmann::json j;
  j["path"] = m.path();
  j["architecture"] = c.arch;
  j["name"] = c.name;
  j["vocab"] = c.n_vocab;
  j["dim"] = c.dim;
  j["ffn_dim"] = c.n_ff;
  j["layers"] = c.n_layers;
  j["heads"] = c.n_heads;
  j["kv_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["context_length"] = c.context_length;
  j["rope_theta"] = c.rope_theta;
  j["rope_style"] = c.rope_style == RopeStyle::kHalves ? "halves" : "adjacent pairs";
  j["rms_eps"] = c.rms_eps;
  j["tied_embeddings"] = c.tied_embeddings;
  j["features"] = DescribeFeatures(c);
  if (c.has_sliding_window()) {
    nlohmann::json windows = nlohmann::json::array();
    for (int l = 0; l < c.n_layers; ++l) windows.push_back(c.layer(l).window);
    j["sliding_window_per_layer"] = windows;
  }
  int64_t params = 0;
  nlohmann::json types = nlohmann::json::object();
  for (const StoredTensor& t : m.stored_tensors()) {
    params += t.n_elements;
    auto& e = types[std::string(GgmlTypeInfoOf(t.type).name)];
    if (e.is_null()) e = {{"tensors", 0}, {"bytes", uint64_t{0}}};
    e["tensors"] = e.value("tensors", 0) + 1;
    e["bytes"] = e.value("bytes", uint64_t{0}) + t.bytes;
  }
  j["parameters"] = params;
  j["tensors"] = m.stored_tensors().size();
  j["format"] = m.source_format();
  j["tensor_types"] = types;
  const Tokenizer& tok = m.tokenizer();
  j["tokenizer"] = {
      {"kind", tok.spec().kind == TokenizerSpec::Kind::kSentencePiece ? "llama (SentencePiece)"
                                                                      : "gpt2 (byte-level BPE)"},
      {"pre", tok.spec().pre},
      {"bos", tok.bos()},
      {"eos", tok.eos()},
      {"add_bos", tok.spec().add_bos}};
  nlohmann::json kv = nlohmann::json::object();
  for (KvDtype d : kAllKvDtypes) {
    auto row = KvRowBytes(d, c.kv_dim());
    kv[std::string(KvDtypeName(d))] =
        row.ok() ? nlohmann::json(2ull * c.n_layers * *row) : nlohmann::json("n/a");
  }
  j["kv_bytes_per_token"] = kv;
  return j;
}

// The same as text.
void PrintDescription(const Model& m, const nlohmann::json& j) {
  const ModelConfig& c = m.config();
  const Tokenizer& tok = m.tokenizer();
  std::printf("model         %s (%s)\n", m.path().c_str(), c.name.c_str());
  std::printf("architecture  %s: dim %d, ffn %d, %d layers, %d heads, %d kv heads, head dim %d\n",
              c.arch.c_str(), c.dim, c.n_ff, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim);
  std::printf("context       %d trained; rope theta %g (%s); rms eps %g%s\n", c.context_length,
              c.rope_theta, j["rope_style"].get<std::string>().c_str(), c.rms_eps,
              c.tied_embeddings ? "; tied embeddings" : "");
  if (const std::string f = DescribeFeatures(c); !f.empty()) {
    std::printf("features      %s\n", f.c_str());
  }
  std::printf("format        %s\n", m.source_format().c_str());
  std::printf("parameters    %ld in %zu tensors\n", (long)j["parameters"].get<int64_t>(),
              m.stored_tensors().size());
  for (auto& [name, e] : j["tensor_types"].items()) {
    std::printf("  %-6s      %4d tensors, %s bytes\n", name.c_str(), e["tensors"].get<int>(),
                std::to_string(e["bytes"].get<uint64_t>()).c_str());
  }
  std::printf("vocabulary    %d tokens, %s; BOS %d, EOS %d%s\n", c.n_vocab,
              j["tokenizer"]["kind"].get<std::string>().c_str(), tok.bos(), tok.eos(),
              tok.spec().add_bos ? " (BOS added)" : "");
  std::printf("KV bytes per token (2 x %d layers x %d kv heads x %d dims):\n", c.n_layers,
              c.n_kv_heads, c.head_dim);
  for (auto& [name, v] : j["kv_bytes_per_token"].items()) {
    std::printf("  %-6s      %s\n", name.c_str(), v.dump().c_str());
  }
}

}  // namespace

int InspectMain(int argc, char** argv) {
  bool json = false;
  Args a("inspect",
         "pagedinfer inspect MODEL [--json]   (MODEL: a GGUF file or a Hugging Face folder)",
         {"pagedinfer inspect stories260K.gguf", "pagedinfer inspect model.gguf --json"});
  a.AddSwitch("--json", &json, "print JSON");
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  if (a.positional().size() != 1) {
    std::fprintf(stderr, "error: give one model file (see --help)\n");
    return 2;
  }
  auto model = Model::Load(a.positional()[0]);
  if (!model.ok()) return Fail(model.status());
  const nlohmann::json j = Describe(**model);
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    PrintDescription(**model, j);
  }
  return 0;
}

}  // namespace pinfer::cli
