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

}  // namespace
}  // namespace pinfer
