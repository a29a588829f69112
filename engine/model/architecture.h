// The architectures the engine runs, by GGUF's general.architecture names, and what each adds
// to the llama block (ModelConfig's feature fields), with the GGUF keys of those features as
// llama.cpp names and defaults them (src/models/<arch>.cpp there).
//
//   llama   Llama 2/3, Mistral, TinyLlama; RoPE on adjacent pairs. A sliding window when
//           llama.attention.sliding_window says so (Mistral 7B v0.1: 4096 on every layer).
//   qwen2   RoPE on halves, Q/K/V biases.
//   qwen3   RoPE on halves, RMSNorm over each head of Q and K before RoPE, no biases.
//   gemma2  RoPE on halves, embeddings times sqrt(dim), GeGLU (tanh GELU), RMSNorm after the
//           attention and the FFN too, attention and final logit soft-capping (50, 30), q
//           scaled by query_pre_attn_scalar^-1/2, every other layer a 4096 window (from layer
//           0), tied output.
//   gemma3  gemma2's block with Q/K norms and no attention soft-capping; five window layers
//           for each full one, window layers with their own RoPE base (10000) and no RoPE
//           scaling, full layers with rope.freq_base and the file's linear scaling.
//   phi3    RoPE on halves (partial when rope.dimension_count < head_dim), fused attn_qkv and
//           ffn_up (gate and up), q scaled by 1 / sqrt(head_dim); a sliding window on every
//           layer when phi3.attention.sliding_window > 0.
//
// Norm weights of gemma files hold 1 + w (llama.cpp's converter adds the 1 that Gemma's
// RMSNorm adds at run time), so every architecture's RMSNorm here is x / rms(x) * weight.
//
// Two deliberate departures from llama.cpp, which disables these windows: llama and phi3
// files that state a sliding window get it (as Hugging Face transformers and vLLM apply it);
// llama.cpp attends to the whole context there, so the two differ past the window.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/model/model_config.h"

namespace pinfer {

class GgufFile;
class GgufWriter;

// "llama (Llama 2/3, Mistral, TinyLlama), qwen2, qwen3, gemma2, gemma3, phi3".
std::string SupportedArchitectures();

// Sets c->arch and the architecture's fixed features (RoPE pair order, biases, Q/K norms,
// post-norms, embedding scale, activation, gemma2's soft-capping defaults and tied output).
// Unimplemented, naming the supported list, for any other name.
absl::Status SetArchitecture(std::string_view arch, ModelConfig* c);

// The query scale of gemma's attention, as llama.cpp derives it from the shape (GGUF has no
// key for query_pre_attn_scalar): 1 / sqrt(dim / n_heads) for the 27B models (gemma2 with 46
// layers, gemma3 with 62), else 1 / sqrt(head_dim).
float GemmaQueryScale(const ModelConfig& c);

// The architecture's own {arch}.* keys into c, after the common hyper-parameters are read:
// attention.sliding_window and .sliding_window_pattern (a period or one bool per layer),
// rope.freq_base_swa, attn_logit_softcapping, final_logit_softcapping, and the query scale.
// Errors name the key and the bad value.
absl::Status ReadArchitectureKeys(const GgufFile& f, ModelConfig* c);

// The inverse: writes those keys so that ReadArchitectureKeys (and llama.cpp, for the
// architectures where it honours them) reads back the same model.
void WriteArchitectureKeys(const ModelConfig& c, GgufWriter* w);

// The period p for which SetSlidingWindow(window, p, ...) reproduces c.layers' windows (0:
// every layer a window layer); -1 when no period does (or there is no window).
int SlidingWindowPeriod(const ModelConfig& c);

// The window pattern period an architecture assumes when its file names none: gemma2 2,
// gemma3 6, others 0 (every layer).
int DefaultWindowPeriod(std::string_view arch);

// The features beyond the llama block, for `inspect` ("Q/K norms; GeGLU; ...; sliding window
// 1024 on 29 of 34 layers (RoPE base 10000 there)"); "" for a plain llama model.
std::string DescribeFeatures(const ModelConfig& c);

}  // namespace pinfer
