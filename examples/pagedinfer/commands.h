// The pagedinfer subcommands: each is a main() of its own in cmd_<name>.cc.
#pragma once

namespace pinfer::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*main)(int argc, char** argv);  // argv[0] is the first argument after the name
};

int RunMain(int argc, char** argv);
int TokenizeMain(int argc, char** argv);
int InspectMain(int argc, char** argv);
int SynthMain(int argc, char** argv);
int PlanMain(int argc, char** argv);
int DemoMain(int argc, char** argv);
int QuantizeMain(int argc, char** argv);
int PerplexityMain(int argc, char** argv);
int QualityMain(int argc, char** argv);

inline constexpr Command kCommands[] = {
    {"run", "generate text from a prompt", RunMain},
    {"tokenize", "show the token ids a model's tokenizer makes of a text", TokenizeMain},
    {"inspect", "describe a model file: shapes, tensor types, vocabulary, KV cost", InspectMain},
    {"plan", "size the memory ledger and KV pool for a model and memory budget", PlanMain},
    {"synth", "write a Llama-shaped GGUF with seeded random weights", SynthMain},
    {"quantize", "requantize an F32/F16/BF16 GGUF to Q8_0, Q4_0, Q4_K_M, ...", QuantizeMain},
    {"perplexity", "perplexity over a text (as llama-perplexity), KL against a base run",
     PerplexityMain},
    {"quality", "perplexity and KL of every weight format x every KV format", QualityMain},
    {"demo", "the main job on a built-in default: generation, paged KV, the memory ledger",
     DemoMain},
};

}  // namespace pinfer::cli
