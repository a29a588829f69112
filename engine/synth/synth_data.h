// What a synthetic model holds, independent of the file writer: a SentencePiece-style
// vocabulary and seeded pseudo-random weight rows.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/model/model_shapes.h"
#include "loaders/tokenizer.h"

namespace pinfer {

// n_vocab tokens: <unk> (0), <s> (1, BOS), </s> (2, EOS), the 256 byte tokens <0x00>..<0xFF>
// (3..258), then "▁", single characters, common English words with the "▁" word prefix, and
// generated syllable words (with and without "▁") until n_vocab; scores fall with the id.
// For arch "phi3" the last id is "<|endoftext|>" (a control token), where Phi-3's own files
// hold it (32000, after the SentencePiece pieces): llama.cpp's vocabulary loader requires that
// token in a model whose name says phi3, and both it and the engine end generation at it.
// InvalidArgument when n_vocab < 259 (too small for the special and byte tokens), or < 260
// for phi3.
absl::StatusOr<TokenizerSpec> SynthVocabulary(int n_vocab, std::string_view arch = "");

// Counter-based pseudo-random rows: the values depend only on (seed, tensor, row), never on
// the thread that makes them, so files are identical for a seed whatever the thread count.
// Values are mean + stddev x z with z approximately standard normal (the sum of four uniform
// 16-bit draws, rescaled: bounded by +-3.47, variance 1).
void SynthRow(uint64_t seed, uint64_t tensor_index, int64_t row, float mean, float stddev,
              float* out, int64_t n);

// How a tensor of a synthetic model is drawn: norms 1 (N(1, 0.1) when varied_norms, so that a
// norm applied to the wrong vector, or not at all, changes the logits), biases N(0, 0.01),
// matrices N(0, 0.02).
struct SynthInit {
  float mean, stddev;
};
SynthInit SynthInitFor(const TensorPlan& t, bool varied_norms = false);

}  // namespace pinfer
