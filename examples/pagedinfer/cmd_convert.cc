// pagedinfer convert: a Hugging Face model folder (or a GGUF file) written as a GGUF file.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "engine/convert/gguf_export.h"
#include "engine/memory/memory_ledger.h"
#include "engine/model/model.h"
#include "engine/model/model_shapes.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"
#include "examples/pagedinfer/progress.h"

namespace pinfer::cli {

int ConvertMain(int argc, char** argv) {
  std::string type = "F32", output;
  Args args("convert",
            "pagedinfer convert DIR -o FILE.gguf [--type TYPE]\n"
            "Writes a Hugging Face model folder (config.json, *.safetensors, tokenizer.json;\n"
            "F32/F16/BF16 or GPTQ/AWQ 4-bit) as a GGUF file llama.cpp accepts. Llama q/k rows\n"
            "are permuted from Hugging Face's rotate-half order to GGUF's adjacent pairs, as\n"
            "llama.cpp's convert_hf_to_gguf.py does. 4-bit layers are dequantized, then stored\n"
            "as TYPE.",
            {"pagedinfer convert ./TinyLlama-1.1B -o tinyllama-f16.gguf --type F16",
             "pagedinfer convert ./Llama-2-7B-GPTQ -o llama2-7b-q4_0.gguf --type Q4_0"});
  args.Add("-o,--output", &output, "GGUF file to write (required)");
  args.Add("--type", &type,
           "file type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q6_K, Q4_K_M, Q5_K_M "
           "(norms stay F32)");
  if (int rc = ParseOrExit(args, argc, argv); rc >= 0) return rc;
  if (args.positional().size() != 1 || output.empty()) {
    std::fprintf(stderr,
                 "error: give one model folder and the file to write with -o FILE "
                 "(see --help)\n");
    return 2;
  }
  absl::StatusOr<FileType> ft = ParseFileType(type);
  if (!ft.ok()) {
    return Fail(ft.status(), 2);
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Model>> model;
  {
    LoadProgress progress(args.positional()[0]);
    progress.Stage("reading the model");
    model = Model::Load(args.positional()[0]);
  }
  if (!model.ok()) {
    return Fail(model.status());
  }
  if (absl::Status s = WriteModelAsGguf(**model, *ft, output, TensorProgressLines()); !s.ok()) {
    return Fail(s);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(output, ec);
  std::printf("wrote %s: %s (%s) from %s as %s, %s on disk, %.1f s\n", output.c_str(),
              (*model)->config().arch.c_str(), (*model)->config().name.c_str(),
              (*model)->source_format().c_str(), ft->name.c_str(),
              ec ? "?" : FormatBytes(size).c_str(), secs);
  return 0;
}

}  // namespace pinfer::cli
