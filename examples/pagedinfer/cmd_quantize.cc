// pagedinfer quantize: requantizes an F32/F16/BF16 GGUF into Q8_0, Q4_0, Q4_K_M, ...
#include <chrono>
#include <cstdio>
#include <string>

#include "engine/convert/quantize.h"
#include "engine/memory/memory_ledger.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/progress.h"
#include "loaders/absl_compat.h"

namespace pinfer::cli {

int QuantizeMain(int argc, char** argv) {
  int threads = 0;
  Args args(
      "quantize",
      "pagedinfer quantize IN.gguf OUT.gguf TYPE\n"
      "Writes OUT.gguf with the tensors of IN.gguf (F32, F16 or BF16) stored as TYPE: norms\n"
      "stay F32, Q4_K_M / Q5_K_M put Q6_K on the output and on half of attn_v / ffn_down, and\n"
      "a tensor whose rows the type's block does not divide falls back to a type that fits\n"
      "(printed per tensor). All metadata is copied; general.file_type is set to TYPE.",
      {"pagedinfer quantize stories260K.gguf stories260K-Q8_0.gguf Q8_0",
       "pagedinfer quantize llama-2-7b-f16.gguf llama-2-7b-Q4_K_M.gguf Q4_K_M"});
  args.Add("-t,--threads", &threads, "worker threads; 0: all hardware threads");
  if (int rc = ParseOrExit(args, argc, argv); rc >= 0) return rc;
  if (args.positional().size() != 3) {
    std::fprintf(stderr,
                 "error: give IN.gguf OUT.gguf TYPE, e.g. pagedinfer quantize in.gguf out.gguf "
                 "Q4_K_M (see --help)\n");
    return 2;
  }
  const std::string& in = args.positional()[0];
  const std::string& out = args.positional()[1];
  const std::string& type = args.positional()[2];
  QuantizeOptions options;
  options.threads = threads;
  options.note = [](const std::string& line) { std::fprintf(stderr, "note: %s\n", line.c_str()); };
  options.progress = TensorProgressLines();  // a line per tensor on a terminal
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<QuantizeSummary> sum = QuantizeGguf(in, out, type, options);
  if (!sum.ok()) {
    return Fail(sum.status(), sum.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string types;
  for (const auto& [t, n] : sum->tensors_by_type) {
    types += (types.empty() ? "" : ", ") + std::string(GgmlTypeInfoOf(t).name) + " x" +
             std::to_string(n);
  }
  std::printf(
      "wrote %s: %s, %d tensors (%s), %d not in %s's own type, %s -> %s of tensor data, "
      "%.2f s\n",
      out.c_str(), type.c_str(), sum->tensors, types.c_str(), sum->fallbacks, type.c_str(),
      FormatBytes(sum->in_bytes).c_str(), FormatBytes(sum->out_bytes).c_str(), secs);
  return 0;
}

}  // namespace pinfer::cli
