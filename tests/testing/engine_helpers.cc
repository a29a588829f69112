#include "tests/testing/engine_helpers.h"

#include <algorithm>
#include <cmath>

#include "tests/testing/test_models.h"

namespace pinfer::testing {

void StoriesFixture::SetUp() {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto m = Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status();
  model_ = std::move(*m);
}

EngineConfig SmallConfig(KvDtype dtype, KvLayout layout) {
  EngineConfig c;
  c.kv_dtype = dtype;
  c.kv_layout = layout;
  c.max_model_len = 512;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 256;
  c.kv_cache_memory = 4ull << 20;
  c.threads = 2;
  return c;
}

static absl::StatusOr<std::unique_ptr<Engine>> Make(const Model& model, const EngineConfig& c) {
  return Engine::Create(model, c, nullptr, /*quiet=*/true);
}

absl::StatusOr<std::vector<int32_t>> GreedyTokens(const Model& model, EngineConfig config,
                                                  std::vector<int32_t> prompt, int max_tokens,
                                                  std::unique_ptr<Backend> backend,
                                                  std::vector<float>* first_logits) {
  auto e = Engine::Create(model, config, std::move(backend), /*quiet=*/true);
  if (!e.ok()) return e.status();
  if (first_logits != nullptr) {
    (*e)->SetLogitsObserver([first_logits](int64_t, int, const float* l, int n) {
      if (first_logits->empty()) first_logits->assign(l, l + n);
    });
  }
  GenerationRequest req;
  req.prompt = std::move(prompt);
  req.params.temperature = 0;
  req.params.max_tokens = max_tokens;
  auto rid = (*e)->AddRequest(req);
  if (!rid.ok()) return rid.status();
  std::vector<int32_t> out;
  while ((*e)->HasWork()) {
    auto step = (*e)->Step();
    if (!step.ok()) return step.status();
    for (const SequenceOutput& o : *step)
      out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
  }
  return out;
}

absl::StatusOr<std::vector<float>> PromptLogits(const Model& model, EngineConfig config,
                                                std::vector<int32_t> prompt) {
  auto e = Make(model, config);
  if (!e.ok()) return e.status();
  std::vector<float> logits;
  (*e)->SetLogitsObserver([&](int64_t, int, const float* l, int n) {
    if (logits.empty()) logits.assign(l, l + n);
  });
  GenerationRequest req;
  req.prompt = std::move(prompt);
  req.params.temperature = 0;
  req.params.max_tokens = 1;
  auto rid = (*e)->AddRequest(req);
  if (!rid.ok()) return rid.status();
  while ((*e)->HasWork()) {
    auto step = (*e)->Step();
    if (!step.ok()) return step.status();
  }
  return logits;
}

absl::StatusOr<std::map<std::pair<int64_t, int>, Completion>> RunToEnd(Engine& engine) {
  std::map<std::pair<int64_t, int>, Completion> out;
  while (engine.HasWork()) {
    auto step = engine.Step();
    if (!step.ok()) return step.status();
    for (const SequenceOutput& o : *step) {
      Completion& c = out[{o.request_id, o.index}];
      c.tokens.insert(c.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      c.text += o.new_text;
      c.cached_prompt_tokens = o.cached_prompt_tokens;
      if (o.finished) c.reason = o.reason;
    }
  }
  return out;
}

Diff Compare(const std::vector<float>& a, const std::vector<float>& b) {
  Diff d;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double e = static_cast<double>(a[i]) - b[i];
    d.max_abs = std::max(d.max_abs, std::abs(e));
    num += e * e;
    den += static_cast<double>(b[i]) * b[i];
  }
  d.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return d;
}

int Argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace pinfer::testing
