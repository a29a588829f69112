// pagedinfer tokenize: the token ids a model's tokenizer makes of a text (BOS included when
// the model adds one), as llama-tokenize prints them.
#include <cstdio>

#include "engine/model/model.h"
#include "examples/pagedinfer/args.h"
#include "examples/pagedinfer/commands.h"

namespace pinfer::cli {

int TokenizeMain(int argc, char** argv) {
  std::string model_path, prompt;
  bool ids_only = false, no_bos = false, parse_special = false;
  Args a("tokenize", "pagedinfer tokenize -m MODEL -p TEXT [--ids-only]",
         {"pagedinfer tokenize -m stories260K.gguf -p \"Once upon a time\"",
          "pagedinfer tokenize -m model.gguf -p \"Hello world\" --ids-only"});
  a.Add("-m,--model", &model_path, "model: a GGUF file or a Hugging Face folder");
  a.Add("-p,--prompt", &prompt, "text to tokenize");
  a.AddSwitch("--ids-only", &ids_only, "print only the ids, as a list");
  a.AddSwitch("--no-bos", &no_bos, "do not add BOS/EOS");
  a.AddSwitch("--parse-special", &parse_special, "turn special-token texts into their ids");
  if (int rc = ParseOrExit(a, argc, argv); rc >= 0) return rc;
  if (model_path.empty()) {
    std::fprintf(stderr, "error: -m MODEL is required (see --help)\n");
    return 2;
  }
  auto model = Model::Load(model_path);
  if (!model.ok()) {
    return Fail(model.status());
  }
  const Tokenizer& tok = (*model)->tokenizer();
  const std::vector<int32_t> ids = tok.Encode(prompt, !no_bos, parse_special);
  if (ids_only) {
    std::printf("[");
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? ", " : "", ids[i]);
    std::printf("]\n");
    return 0;
  }
  for (int32_t id : ids) {
    std::printf("%6d -> '%s'\n", id, tok.TokenBytes(id).c_str());
  }
  return 0;
}

}  // namespace pinfer::cli
