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
int ConvertMain(int argc, char** argv);
int ServeMain(int argc, char** argv);
int ChatMain(int argc, char** argv);
int BenchMain(int argc, char** argv);
int BenchKvMain(int argc, char** argv);
int BenchServeMain(int argc, char** argv);
int QuantizeMain(int argc, char** argv);
int PerplexityMain(int argc, char** argv);
int QualityMain(int argc, char** argv);

inline constexpr Command kCommands[] = {
    {"run", "generate text from a prompt", RunMain},
    {"chat", "talk with a model on the terminal (its chat template, streamed tokens)", ChatMain},
    {"serve", "an OpenAI-compatible HTTP server with continuous batching", ServeMain},
    {"tokenize", "show the token ids a model's tokenizer makes of a text", TokenizeMain},
    {"inspect", "describe a model file: shapes, tensor types, vocabulary, KV cost", InspectMain},
    {"plan", "size the memory ledger and KV pool for a model and memory budget", PlanMain},
    {"convert", "write a Hugging Face model folder (safetensors, GPTQ, AWQ) as a GGUF file",
     ConvertMain},
    {"synth", "write a Llama-shaped GGUF with seeded random weights", SynthMain},
    {"quantize", "requantize an F32/F16/BF16 GGUF to Q8_0, Q4_0, Q4_K_M, ...", QuantizeMain},
    {"perplexity", "perplexity over a text (as llama-perplexity), KL against a base run",
     PerplexityMain},
    {"quality", "perplexity and KL of every weight format x every KV format", QualityMain},
    {"demo", "the main job on a built-in default: generation, paged KV, the memory ledger",
     DemoMain},
    {"bench", "prefill and decode tokens/s (llama-bench's table) and decode GB/s", BenchMain},
    {"bench-kv",
     "paged vs contiguous KV cache on one workload and budget: utilization, "
     "concurrency, throughput",
     BenchKvMain},
    {"bench-serve",
     "a serving benchmark against any OpenAI-compatible server (vLLM's benchmark_serving): "
     "throughput, TTFT, TPOT, ITL",
     BenchServeMain},
};

}  // namespace pinfer::cli
