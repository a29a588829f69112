// The sampling flags of run and chat, named as llama.cpp's CLI names them: --temp, --top-k,
// --top-p, --min-p, --repeat-penalty, --repeat-last-n, --presence-penalty,
// --frequency-penalty, -s/--seed (-1: a random seed, llama.cpp's default).
#pragma once

#include <cstdint>

#include "engine/sampler.h"
#include "examples/pagedinfer/args.h"

namespace pinfer::cli {

struct SamplingFlags {
  SamplingParams params;
  int64_t seed = -1;

  void Register(Args& args);
  // params with the seed applied: -1 leaves it unset (a random one per request).
  SamplingParams Resolved() const;
};

}  // namespace pinfer::cli
