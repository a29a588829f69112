// libFuzzer target for a Hugging Face folder's JSON files as the loaders read them: the input
// is config.json, a NUL byte, tokenizer.json, a NUL byte, tokenizer_config.json (missing parts
// are empty). Each must parse to a config / tokenizer or an error; a tokenizer that builds is
// run: a fixed text (with and without special-token parsing) is encoded, every id encoded
// must be in the vocabulary, and the ids are decoded back, whole and token by token.
// Built with -DPAGEDINFER_FUZZ=ON and clang as a fuzzer, and in every build as a replay test
// of its seed corpus (tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/hf_config.h"
#include "loaders/hf_tokenizer.h"
#include "loaders/tokenizer.h"

namespace {

// The next NUL-terminated part of the input (the rest when there is no NUL).
std::string NextPart(std::string_view* in) {
  const size_t end = in->find('\0');
  std::string part(in->substr(0, end));
  in->remove_prefix(end == std::string_view::npos ? in->size() : end + 1);
  return part;
}

void RunTokenizer(const pinfer::Tokenizer& tok) {
  static constexpr std::string_view kText =
      "Hello world! <s> </s> <|im_start|>user\n 12345 \xC3\xA9t\xC3\xA9 \xE2\x96\x81x\tend\xFF";
  volatile size_t sink = 0;
  for (bool parse_special : {false, true}) {
    const std::vector<int32_t> ids = tok.Encode(kText, /*add_special=*/true, parse_special);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok.n_vocab()) __builtin_trap();  // an id outside the vocabulary
      sink = sink + tok.TokenBytes(id).size();
    }
    sink = sink + tok.Decode(ids).size();
    pinfer::StreamDecoder dec(tok);
    for (int32_t id : ids) sink = sink + dec.Push(id).size();
    sink = sink + dec.Flush().size();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string config = NextPart(&in);
  const std::string tokenizer = NextPart(&in);
  const std::string tokenizer_config = NextPart(&in);
  (void)pinfer::ParseHfConfig(config, "config.json");
  absl::StatusOr<pinfer::TokenizerSpec> spec =
      pinfer::TokenizerSpecFromHfFiles(tokenizer, tokenizer_config);
  if (!spec.ok()) return 0;
  absl::StatusOr<std::unique_ptr<pinfer::Tokenizer>> tok = pinfer::Tokenizer::Create(*spec);
  if (tok.ok()) RunTokenizer(**tok);
  return 0;
}
