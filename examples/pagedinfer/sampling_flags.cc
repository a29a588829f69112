#include "examples/pagedinfer/sampling_flags.h"

namespace pinfer::cli {

void SamplingFlags::Register(Args& a) {
  SamplingParams& sp = params;
  a.Add("--temp", &sp.temperature, "temperature (0: greedy)");
  a.Add("--top-k", &sp.top_k, "top-k (0: off)");
  a.Add("--top-p", &sp.top_p, "top-p (1: off)");
  a.Add("--min-p", &sp.min_p, "min-p (0: off)");
  a.Add("--repeat-penalty", &sp.repetition_penalty,
        "divide positive logits of recent tokens by this, multiply negative ones (1: off)");
  a.Add("--repeat-last-n", &sp.repeat_last_n,
        "tokens the repeat penalty looks back over, prompt included (-1: all, 0: off)");
  a.Add("--presence-penalty", &sp.presence_penalty,
        "subtract this from the logit of every token already generated (0: off)");
  a.Add("--frequency-penalty", &sp.frequency_penalty,
        "subtract this times its count from the logit of each generated token (0: off)");
  a.Add("-s,--seed", &seed, "sampling seed (-1: a random one)");
}

SamplingParams SamplingFlags::Resolved() const {
  SamplingParams p = params;
  if (seed != -1) p.seed = static_cast<uint64_t>(seed);
  return p;
}

}  // namespace pinfer::cli
