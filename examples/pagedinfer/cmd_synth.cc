// pagedinfer synth: writes a Llama-shaped GGUF with seeded random weights.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/str_join.h"
#include "engine/memory/memory_ledger.h"
#include "engine/memory/model_plan.h"
#include "engine/model/model_shapes.h"
#include "engine/synth/synth.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"

namespace pinfer::cli {

int SynthMain(int argc, char** argv) {
  std::string shape = "tiny", type = "Q4_K_M", output;
  int64_t seed = 1;
  int threads = 0, layers = 0;
  Args args(
      "synth",
      "pagedinfer synth --shape NAME --type TYPE -o FILE [--seed S]\n"
      "Writes a model of a named shape with seeded random weights (not trained: its text is\n"
      "noise) for tests and benchmarks. The same seed writes the same file.",
      {"pagedinfer synth --shape tiny --type Q4_0 -o tiny.gguf",
       "pagedinfer synth --shape llama2-7b --type Q4_K_M -o llama2-7b-synth.gguf --seed 7",
       "pagedinfer synth --shape llama2-7b --type Q4_0 --layers 2 -o 7b-widths-2-layers.gguf"});
  args.Add("--shape", &shape, "model shape: " + absl::StrJoin(NamedShapeNames(), ", "));
  args.Add("--type", &type,
           "file type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q6_K, "
           "Q4_K_M, Q5_K_M");
  args.Add("-o,--output", &output, "GGUF file to write (required)");
  args.Add("--seed", &seed, "random seed");
  args.Add("-t,--threads", &threads, "worker threads; 0: all hardware threads");
  args.Add("--layers", &layers,
           "keep only the shape's first N layers, every width unchanged (0: all); a 7B's "
           "matrices at a fraction of its size, for quick checks");
  if (int rc = ParseOrExit(args, argc, argv); rc >= 0) return rc;
  if (output.empty()) {
    std::fprintf(stderr, "error: give the file to write with -o FILE (see --help)\n");
    return 2;
  }
  absl::StatusOr<PlanInput> plan = PlanInputFromShape(shape, type);  // validates both names
  if (!plan.ok()) {
    return Fail(plan.status(), 2);
  }
  const auto start = std::chrono::steady_clock::now();
  SynthOptions options{static_cast<uint64_t>(seed), threads, layers};
  if (absl::Status s = WriteSynthModel(shape, type, output, options); !s.ok()) {
    return Fail(s);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(output, ec);
  if (layers > 0) {  // the file's own tensor bytes, not the whole shape's
    absl::StatusOr<PlanInput> written = PlanInputFromModelFile(output);
    if (!written.ok()) return Fail(written.status());
    plan = std::move(written);
  }
  std::printf("wrote %s: %s %s, seed %lld, %s of tensor data, %s on disk, %.1f s\n", output.c_str(),
              shape.c_str(), plan->weight_format.c_str(), static_cast<long long>(seed),
              FormatBytes(plan->weights_bytes()).c_str(), ec ? "?" : FormatBytes(size).c_str(),
              secs);
  return 0;
}

}  // namespace pinfer::cli
