// The CPU backend's thread count does not change a bit of its results: the same steps (a
// prefill of three sequences' prompts with every token's logits wanted, then a decode step of
// three tokens and one of a single token) on backends of 1, 2 and 3 threads give
// memcmp-identical logits and KV cache rows. The prefill's element-wise work (embedding,
// norms, RoPE and the KV writes, SwiGLU / GeGLU, residual adds, the final norm and soft-cap,
// the matmuls' activation quantization) is split over the pool by token rows, so this checks
// that each row is computed as on one thread and that the threads' KV writes and scratch do not
// collide. Models: stories260K (a real model, F32 weights: the float batch path) and tiny
// synthetic ones covering Q4_K_M (the K-quant 8-bit path, Q4_K with Q6_K), Q4_0 (packed),
// Q8_0 with QK-norm (tiny-qwen3), and F32 with post-norms, GeGLU and soft-capping
// (tiny-gemma2).
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "kvcache/kv_cache.h"
#include "tests/testing/synth_models.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

// What the steps leave: every step's logits, then every KV row the steps wrote.
struct Outputs {
  std::vector<float> logits;
  std::vector<uint8_t> kv;
};

constexpr int kPromptLengths[] = {23, 1, 14};  // 38 tokens: uneven splits over 2 and 3 threads

int32_t TokenAt(const Model& m, int seq, int pos) {
  return static_cast<int32_t>((7 + 13 * pos + 101 * seq) % m.config().n_vocab);
}

Outputs RunSteps(const Model& m, int threads) {
  Outputs out;
  const ModelConfig& c = m.config();
  KvCacheConfig kc = KvCacheConfigFor(c, KvDtype::kF16);
  kc.max_model_len = 64;
  kc.num_blocks = 3 * 64 / kc.block_size;
  kc.prefix_caching = false;
  absl::StatusOr<std::unique_ptr<KvCache>> cache = KvCache::Create(kc);
  EXPECT_TRUE(cache.ok()) << cache.status();
  if (!cache.ok()) return out;
  CpuBackend backend(m, /*max_tokens=*/64, threads);
  EXPECT_EQ(backend.threads(), threads);
  EXPECT_TRUE(backend.ReserveForLimits(3, kc.max_model_len, kc.block_size).ok());
  EXPECT_TRUE(backend.Commit(false).ok());

  std::vector<int> lengths(std::begin(kPromptLengths), std::end(kPromptLengths));
  auto run = [&](const ForwardBatch& batch) {
    std::vector<float> logits(batch.logit_rows.size() * static_cast<size_t>(c.n_vocab));
    absl::Status s = backend.Forward(batch, **cache, logits.data());
    EXPECT_TRUE(s.ok()) << s;
    out.logits.insert(out.logits.end(), logits.begin(), logits.end());
  };
  ForwardBatch prefill;
  for (int seq = 0; seq < 3; ++seq) {
    EXPECT_TRUE((*cache)->AddSequence(seq).ok());
    EXPECT_TRUE((*cache)->Append(seq, lengths[static_cast<size_t>(seq)]).ok());
    for (int pos = 0; pos < lengths[static_cast<size_t>(seq)]; ++pos) {
      prefill.Add(TokenAt(m, seq, pos), pos, seq, /*want_logits=*/true);
    }
  }
  run(prefill);
  ForwardBatch decode;  // one token of each sequence
  for (int seq = 0; seq < 3; ++seq) {
    EXPECT_TRUE((*cache)->Append(seq, 1).ok());
    const int pos = lengths[static_cast<size_t>(seq)]++;
    decode.Add(TokenAt(m, seq, pos), pos, seq, true);
  }
  run(decode);
  ForwardBatch single;  // one token alone
  EXPECT_TRUE((*cache)->Append(0, 1).ok());
  single.Add(TokenAt(m, 0, lengths[0]), lengths[0], 0, true);
  ++lengths[0];
  run(single);

  const size_t row_bytes = (*cache)->row_bytes();
  for (int seq = 0; seq < 3; ++seq) {
    for (int pos = 0; pos < lengths[static_cast<size_t>(seq)]; ++pos) {
      for (int l = 0; l < c.n_layers; ++l) {
        for (int kv = 0; kv < 2; ++kv) {
          const uint8_t* row = (*cache)->TokenRow(seq, pos, l, kv);
          EXPECT_NE(row, nullptr);
          if (row != nullptr) out.kv.insert(out.kv.end(), row, row + row_bytes);
        }
      }
    }
  }
  return out;
}

void ExpectThreadCountsAgree(const Model& m) {
  const Outputs one = RunSteps(m, 1);
  ASSERT_EQ(one.logits.size(), (38u + 3u + 1u) * static_cast<size_t>(m.config().n_vocab));
  ASSERT_FALSE(one.kv.empty());
  for (int threads : {2, 3}) {
    const Outputs many = RunSteps(m, threads);
    ASSERT_EQ(many.logits.size(), one.logits.size());
    ASSERT_EQ(many.kv.size(), one.kv.size());
    EXPECT_EQ(std::memcmp(many.logits.data(), one.logits.data(), one.logits.size() * sizeof(float)),
              0)
        << threads << " threads";
    EXPECT_EQ(std::memcmp(many.kv.data(), one.kv.data(), one.kv.size()), 0)
        << threads << " threads";
  }
}

TEST(CpuBackendThreads, Stories260KGivesTheSameBitsOnOneTwoAndThreeThreads) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status();
  ExpectThreadCountsAgree(**m);
}

class SynthThreadsTest : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(SynthThreadsTest, GivesTheSameBitsOnOneTwoAndThreeThreads) {
  std::unique_ptr<Model> m = testing::SynthModel(GetParam().first, GetParam().second);
  ASSERT_NE(m, nullptr);
  ExpectThreadCountsAgree(*m);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SynthThreadsTest,
                         ::testing::Values(std::pair{"tiny", "Q4_K_M"}, std::pair{"tiny", "Q4_0"},
                                           std::pair{"tiny-qwen3", "Q8_0"},
                                           std::pair{"tiny-gemma2", "F32"}),
                         [](const auto& info) {
                           std::string name =
                               std::string(info.param.first) + "_" + info.param.second;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace pinfer
