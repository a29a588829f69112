// Tokenizer::FromGguf: the tokenizer.ggml.* metadata keys of a GGUF file -> TokenizerSpec.
// Kept apart from tokenizer.cc so programs that never read GGUF do not link the reader.
#include <climits>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"
#include "loaders/gguf.h"
#include "loaders/tokenizer.h"

namespace pinfer {
namespace {

// An optional integer id key: -1 when absent.
absl::StatusOr<int32_t> OptionalId(const GgufFile& f, std::string_view key) {
  if (f.Find(key) == nullptr) return -1;
  auto v = f.GetInt(key);
  if (!v.ok()) return v.status();
  // Converters write 0xFFFFFFFF (a u32 -1) for "none".
  if (*v == -1 || *v == (int64_t)UINT32_MAX) return -1;
  if (*v < 0 || *v > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF key ", Sv(key), " = ", *v, " is not a token id"));
  }
  return static_cast<int32_t>(*v);
}

absl::Status OptionalBool(const GgufFile& f, std::string_view key, bool* out) {
  if (f.Find(key) == nullptr) return absl::OkStatus();
  auto v = f.GetBool(key);
  if (!v.ok()) return v.status();
  *out = *v;
  return absl::OkStatus();
}

// tokenizer.ggml.model (and .pre): the kind of tokenizer and the defaults that follow from it.
absl::Status ReadKind(const GgufFile& file, TokenizerSpec& spec) {
  auto model = file.GetString("tokenizer.ggml.model");
  if (!model.ok()) {
    return absl::NotFoundError(absl::StrCat(
        "GGUF file has no tokenizer (tokenizer.ggml.model: ", model.status().message(), ")"));
  }
  if (*model == "llama") {
    spec.kind = TokenizerSpec::Kind::kSentencePiece;
    spec.add_space_prefix = true;
  } else if (*model == "gpt2") {
    spec.kind = TokenizerSpec::Kind::kBytePairGpt2;
    spec.add_space_prefix = false;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.ggml.model \"", *model, "\" is not supported (llama, gpt2)"));
  }
  if (file.Find("tokenizer.ggml.pre") != nullptr) {
    auto pre = file.GetString("tokenizer.ggml.pre");
    if (!pre.ok()) return pre.status();
    spec.pre = *pre;
  }
  if (spec.kind == TokenizerSpec::Kind::kBytePairGpt2) {
    // llama.cpp: Llama-3 vocabularies emit a pre-token found whole in the vocab directly,
    // and add BOS by default; other byte-level BPE vocabularies do neither unless told.
    const bool llama3 = spec.pre == "llama-bpe" || spec.pre == "llama3";
    spec.ignore_merges = llama3;
    spec.add_bos = llama3;
  }
  return absl::OkStatus();
}

// tokenizer.ggml.token_type: one known type per token.
absl::Status ReadTokenTypes(const GgufFile& file, TokenizerSpec& spec) {
  if (file.Find("tokenizer.ggml.token_type") == nullptr) return absl::OkStatus();
  auto types = file.GetIntArray("tokenizer.ggml.token_type");
  if (!types.ok()) return types.status();
  const size_t n = spec.tokens.size();
  if (types->size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.ggml.token_type has ", types->size(),
                                                   " entries for ", n, " tokens"));
  }
  spec.types.reserve(n);
  for (int64_t t : *types) {
    if (t < 0 || t > 6) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.ggml.token_type holds an unknown type ", t));
    }
    spec.types.push_back(static_cast<TokenType>(t));
  }
  return absl::OkStatus();
}

// The vocabulary: tokens, scores, types and merges.
absl::Status ReadVocabulary(const GgufFile& file, TokenizerSpec& spec) {
  auto tokens = file.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.status();
  spec.tokens = std::move(*tokens);
  if (file.Find("tokenizer.ggml.scores") != nullptr) {
    auto scores = file.GetFloatArray("tokenizer.ggml.scores");
    if (!scores.ok()) return scores.status();
    spec.scores.assign(scores->begin(), scores->end());
  }
  if (absl::Status s = ReadTokenTypes(file, spec); !s.ok()) return s;
  if (file.Find("tokenizer.ggml.merges") != nullptr) {
    auto merges = file.GetStringArray("tokenizer.ggml.merges");
    if (!merges.ok()) return merges.status();
    spec.merges = std::move(*merges);
  }
  return absl::OkStatus();
}

// Special ids; end of generation by the rule HF files follow too (AddEndOfTurnTokens).
absl::Status ReadSpecialIds(const GgufFile& file, TokenizerSpec& spec) {
  struct IdKey {
    const char* key;
    int32_t* out;
  };
  int32_t eot = -1, eom = -1;
  for (const IdKey& k :
       {IdKey{"tokenizer.ggml.bos_token_id", &spec.bos_id},
        IdKey{"tokenizer.ggml.eos_token_id", &spec.eos_id},
        IdKey{"tokenizer.ggml.unknown_token_id", &spec.unk_id},
        IdKey{"tokenizer.ggml.padding_token_id", &spec.pad_id},
        IdKey{"tokenizer.ggml.eot_token_id", &eot}, IdKey{"tokenizer.ggml.eom_token_id", &eom}}) {
    auto v = OptionalId(file, k.key);
    if (!v.ok()) return v.status();
    *k.out = *v;
  }
  for (int32_t id : {eot, eom}) AddEndOfGenerationId(&spec, id);
  AddEndOfTurnTokens(&spec);
  return absl::OkStatus();
}

// add_bos/add_eos/add_space_prefix and the chat template.
absl::Status ReadOptions(const GgufFile& file, TokenizerSpec& spec) {
  for (auto [key, out] : {std::pair{"tokenizer.ggml.add_bos_token", &spec.add_bos},
                          std::pair{"tokenizer.ggml.add_eos_token", &spec.add_eos},
                          std::pair{"tokenizer.ggml.add_space_prefix", &spec.add_space_prefix}}) {
    if (auto s = OptionalBool(file, key, out); !s.ok()) return s;
  }
  if (file.Find("tokenizer.chat_template") != nullptr) {
    auto t = file.GetString("tokenizer.chat_template");
    if (!t.ok()) return t.status();
    spec.chat_template = *t;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file) {
  TokenizerSpec spec;
  for (auto step : {ReadKind, ReadVocabulary, ReadSpecialIds, ReadOptions}) {
    if (absl::Status s = step(file, spec); !s.ok()) return s;
  }
  return Create(std::move(spec));
}

}  // namespace pinfer
