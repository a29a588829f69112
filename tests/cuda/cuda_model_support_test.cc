// Which models the CUDA backend refuses at start, and the features it names (no device call).
#include <gtest/gtest.h>

#include "cuda/model_support.h"
#include "engine/model/model_shapes.h"

namespace pinfer {
namespace {

TEST(CudaModelSupport, NamesWhatTheKernelsLack) {
  for (const char* runs : {"tiny", "llama3-8b", "qwen2-7b", "qwen3-8b", "tiny-qwen3"}) {
    EXPECT_EQ(UnsupportedOnCuda(*NamedShape(runs)), "") << runs;
  }
  EXPECT_EQ(UnsupportedOnCuda(*NamedShape("tiny-gemma2")),
            "post-attention and post-FFN norms, scaled embeddings, GeGLU, logit soft-capping, "
            "sliding-window attention");
  EXPECT_EQ(UnsupportedOnCuda(*NamedShape("tiny-phi3")),
            "partial rotary embeddings, sliding-window attention");
  // Phi-3-mini's q scale is 1 / sqrt(head_dim), the kernels' own; only its window is missing.
  EXPECT_EQ(UnsupportedOnCuda(*NamedShape("phi3-mini")), "sliding-window attention");
  EXPECT_EQ(UnsupportedOnCuda(*NamedShape("mistral-7b-v0.1")), "sliding-window attention");
  ModelConfig bases = *NamedShape("tiny-gemma3");
  for (LayerAttention& a : bases.layers) a.window = 0;
  EXPECT_NE(UnsupportedOnCuda(bases).find("per-layer RoPE bases"), std::string::npos);
}

// A cache with sliding-window layer groups has several block tables per sequence, which the
// kernels do not read: refused with the groups named. One table: accepted.
TEST(CudaModelSupport, RefusesKvCachesWithSeveralBlockTables) {
  const ModelConfig m = *NamedShape("tiny-gemma3");
  KvCacheConfig c = KvCacheConfigFor(m, KvDtype::kF16);  // with the model's windows
  c.num_blocks = 16;
  c.max_model_len = 256;
  KvCacheConfig one_table = c;
  one_table.layer_windows.clear();
  auto plain = KvCache::Create(one_table, KvCache::NoStorage());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(CheckCudaKvCache(**plain).ok());
  auto grouped = KvCache::Create(c, KvCache::NoStorage());
  ASSERT_TRUE(grouped.ok()) << grouped.status();
  const absl::Status s = CheckCudaKvCache(**grouped);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("6 (sliding-window layer groups: 1 full-attention table (1 layer) + "
                             "5 window-32 tables (5 layers), 1 layer per block)"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace pinfer
