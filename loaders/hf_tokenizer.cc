#include "loaders/hf_tokenizer.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"
#include "loaders/json_strict.h"
#include "nlohmann/json.hpp"

namespace pinfer {
namespace {

using json = nlohmann::json;

constexpr const char* kSpaceMark = "\xE2\x96\x81";  // U+2581

absl::Status Bad(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", Sv(what)));
}

// Visits a normalizer / pre-tokenizer node and, for a "Sequence", each of its members.
void ForEach(const json& node, const char* members, const std::function<void(const json&)>& fn) {
  if (!node.is_object()) return;
  if (node.value("type", "") == "Sequence" && node.contains(members) && node[members].is_array()) {
    for (const json& m : node[members]) ForEach(m, members, fn);
    return;
  }
  fn(node);
}

// "<s>" or {"content": "<s>", ...} (tokenizer_config.json's two spellings), else "".
std::string TokenText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

// The pre-tokenizer name for a byte-level BPE's Split regex (see hf_tokenizer.h).
absl::StatusOr<std::string> PreFromRegex(const std::string& re) {
  if (re.find("\\p{N}{1,3}") != std::string::npos) return std::string("llama3");
  if (re.find(" ?\\p{N}+") != std::string::npos) return std::string("gpt2");
  if (re.find("\\p{N}|") != std::string::npos) return std::string("qwen2");
  return absl::UnimplementedError(
      absl::StrCat("tokenizer.json: unsupported pre-tokenizer regex ", re,
                   " (supported: the GPT-2, Llama-3 and Qwen2 patterns)"));
}

// The two files, parsed, and the vocabulary's text -> id map as the steps below build it.
struct HfFiles {
  json tok;                   // tokenizer.json
  json cfg = json::object();  // tokenizer_config.json, or {}
  std::map<std::string, int32_t> id_of;
  int32_t IdOf(const std::string& text) const {
    auto it = id_of.find(text);
    return it == id_of.end() ? -1 : it->second;
  }
  const json& model() const { return tok["model"]; }
};

// Step 1. Both files parsed, with size and nesting bounded before anything is built
// (json_strict.h), so the walks below (ForEach's recursion, dump()) stay shallow whatever
// the file holds; a BPE model with a vocabulary, or a refusal naming what is missing.
absl::Status ParseFiles(const std::string& tokenizer_json, const std::string& config_json,
                        HfFiles* f) {
  absl::StatusOr<json> parsed = ParseJson(tokenizer_json, "tokenizer.json", kTokenizerJsonLimits);
  if (!parsed.ok()) return parsed.status();
  f->tok = std::move(*parsed);
  if (!f->tok.is_object()) return Bad("not a JSON object");
  if (!config_json.empty()) {
    JsonLimits cfg_limits = kConfigJsonLimits;
    cfg_limits.refuse_duplicate_keys = false;
    absl::StatusOr<json> c = ParseJson(config_json, "tokenizer_config.json", cfg_limits);
    if (!c.ok()) return c.status();
    f->cfg = std::move(*c);
    if (!f->cfg.is_object()) {
      return absl::InvalidArgumentError("tokenizer_config.json: not a JSON object");
    }
  }
  if (!f->tok.contains("model") || !std::as_const(f->tok)["model"].is_object()) {
    return Bad("no \"model\" object");
  }
  const json& model = f->model();
  const std::string type = model.value("type", model.contains("merges") ? "BPE" : "");
  if (type != "BPE") {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.json: model type \"", type, "\" is not supported (only BPE)"));
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) return Bad("model.vocab missing");
  return absl::OkStatus();
}

// Step 2. Vocabulary: model.vocab plus added_tokens, by id (special added tokens are control
// tokens, the others user-defined; holes in the id space stay unused).
absl::Status ReadVocabulary(HfFiles* f, TokenizerSpec* spec) {
  std::map<int64_t, std::string> by_id;
  const json& vocab = f->model()["vocab"];
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) return Bad(absl::StrCat("vocab id of ", it.key()));
    by_id[it.value().get<int64_t>()] = it.key();
  }
  std::map<int64_t, bool> added;  // id -> special
  const json& tok = f->tok;
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const json& t : tok["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          !t.contains("content") || !t["content"].is_string()) {
        return Bad("an added_tokens entry lacks id or content");
      }
      const int64_t id = t["id"].get<int64_t>();
      by_id[id] = t["content"].get<std::string>();
      added[id] = t.value("special", false);
    }
  }
  if (by_id.empty()) return Bad("empty vocabulary");
  if (by_id.begin()->first < 0 || by_id.rbegin()->first >= (int64_t)1 << 24) {
    return Bad("token ids out of range");
  }
  const size_t n = (size_t)by_id.rbegin()->first + 1;
  spec->tokens.assign(n, "");
  spec->types.assign(n, TokenType::kUnused);
  for (const auto& [id, text] : by_id) {
    spec->tokens[id] = text;
    spec->types[id] = TokenType::kNormal;
    f->id_of.emplace(text, (int32_t)id);
  }
  for (const auto& [id, special] : added) {
    spec->types[id] = special ? TokenType::kControl : TokenType::kUserDefined;
  }
  return absl::OkStatus();
}

// Step 3. Merges ("a b" strings or [a, b] pairs), ignore_merges and the unknown token.
absl::Status ReadMerges(const HfFiles& f, TokenizerSpec* spec) {
  const json& model = f.model();
  if (model.contains("merges") && model["merges"].is_array()) {
    spec->merges.reserve(model["merges"].size());
    for (const json& m : model["merges"]) {
      if (m.is_string()) {
        spec->merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        spec->merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      } else {
        return Bad("a merge is neither \"a b\" nor [a, b]");
      }
    }
  }
  spec->ignore_merges = model.value("ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    spec->unk_id = f.IdOf(model["unk_token"].get<std::string>());
    if (spec->unk_id >= 0) spec->types[spec->unk_id] = TokenType::kUnknown;
  }
  return absl::OkStatus();
}

// What the pre-tokenizer and normalizer say about the layout.
struct Layout {
  bool byte_level = false, byte_level_regex = false, metaspace = false, prepend = false;
  std::string split_regex;
};

Layout ReadLayout(const json& tok) {
  Layout l;
  const json null_node;
  ForEach(tok.contains("pre_tokenizer") ? tok["pre_tokenizer"] : null_node, "pretokenizers",
          [&](const json& p) {
            const std::string t = p.value("type", "");
            if (t == "ByteLevel") {
              l.byte_level = true;
              l.byte_level_regex = p.value("use_regex", true);
            } else if (t == "Split" && p.contains("pattern") && p["pattern"].contains("Regex")) {
              l.split_regex = p["pattern"]["Regex"].get<std::string>();
            } else if (t == "Metaspace") {
              l.metaspace = true;
              l.prepend =
                  p.value("add_prefix_space", p.value("prepend_scheme", "always") != "never");
            }
          });
  ForEach(tok.contains("normalizer") ? tok["normalizer"] : null_node, "normalizers",
          [&](const json& p) {
            const std::string t = p.value("type", "");
            if (t == "Prepend" && p.value("prepend", "") == kSpaceMark)
              l.prepend = l.metaspace = true;
            if (t == "Replace" && p.value("content", "") == kSpaceMark) l.metaspace = true;
          });
  return l;
}

// Step 4. Which kind: byte-level BPE (with its pre-tokenizer's name), or Llama-2's "▁"
// layout (SentencePiece kind; <0xNN> tokens are byte tokens).
absl::Status ChooseKind(const HfFiles& f, TokenizerSpec* spec) {
  const Layout l = ReadLayout(f.tok);
  const bool byte_fallback = f.model().value("byte_fallback", false);
  if (l.byte_level) {
    spec->kind = TokenizerSpec::Kind::kBytePairGpt2;
    spec->add_space_prefix = false;
    if (!l.split_regex.empty()) {
      auto name = PreFromRegex(l.split_regex);
      if (!name.ok()) return name.status();
      spec->pre = *name;
    } else if (l.byte_level_regex) {
      spec->pre = "gpt2";
    } else {
      return absl::UnimplementedError(
          "tokenizer.json: ByteLevel without a regex split is not supported");
    }
    return absl::OkStatus();
  }
  if (!l.metaspace && !byte_fallback) {
    return absl::UnimplementedError(
        "tokenizer.json: a BPE model needs a ByteLevel pre-tokenizer or the Llama-2 "
        "\"\xE2\x96\x81\" normaliser / byte fallback");
  }
  spec->kind = TokenizerSpec::Kind::kSentencePiece;
  spec->add_space_prefix = l.prepend;
  for (size_t id = 0; id < spec->tokens.size(); ++id) {
    const std::string& s = spec->tokens[id];
    if (spec->types[id] == TokenType::kNormal && s.size() == 6 && s.rfind("<0x", 0) == 0 &&
        s[5] == '>') {
      spec->types[id] = TokenType::kByte;
    }
  }
  return absl::OkStatus();
}

// Step 5. BOS and EOS from the post_processor's TemplateProcessing: a special token first
// in "single" is BOS (added), one last is EOS (added).
absl::Status ReadPostProcessor(const HfFiles& f, TokenizerSpec* spec) {
  spec->add_bos = false;
  if (!f.tok.contains("post_processor") || !f.tok["post_processor"].is_object()) {
    return absl::OkStatus();
  }
  const json& pp = f.tok["post_processor"];
  if (pp.value("type", "") != "TemplateProcessing" || !pp.contains("single") ||
      !pp["single"].is_array() || pp["single"].empty()) {
    return absl::OkStatus();
  }
  const json& single = pp["single"];
  auto special_of = [&](const json& item) -> int32_t {
    if (!item.is_object() || !item.contains("SpecialToken")) return -1;
    return f.IdOf(item["SpecialToken"].value("id", ""));
  };
  if (int32_t b = special_of(single.front()); b >= 0) {
    spec->bos_id = b;
    spec->add_bos = true;
  }
  if (single.size() > 1) {
    if (int32_t e = special_of(single.back()); e >= 0) {
      spec->eos_id = e;
      spec->add_eos = true;
    }
  }
  return absl::OkStatus();
}

// Step 6. tokenizer_config.json's overrides: bos/eos/pad tokens (which must be in the
// vocabulary), add_bos_token/add_eos_token, and the chat template (a string, or the one
// named "default" of a list).
absl::Status ApplyConfig(const HfFiles& f, TokenizerSpec* spec) {
  const json& cfg = f.cfg;
  for (auto [key, out] :
       {std::pair{"bos_token", &spec->bos_id}, std::pair{"eos_token", &spec->eos_id},
        std::pair{"pad_token", &spec->pad_id}}) {
    if (!cfg.contains(key)) continue;
    const std::string text = TokenText(cfg[key]);
    if (text.empty()) continue;
    const int32_t id = f.IdOf(text);
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer_config.json: ", key, " \"", text, "\" is not in the vocabulary"));
    }
    *out = id;
  }
  for (auto [key, out] :
       {std::pair{"add_bos_token", &spec->add_bos}, std::pair{"add_eos_token", &spec->add_eos}}) {
    if (cfg.contains(key) && cfg[key].is_boolean()) *out = cfg[key].get<bool>();
  }
  if (spec->bos_id < 0) spec->add_bos = false;
  if (spec->eos_id < 0) spec->add_eos = false;
  if (cfg.contains("chat_template")) {
    const json& ct = cfg["chat_template"];
    if (ct.is_string()) {
      spec->chat_template = ct.get<std::string>();
    } else if (ct.is_array()) {
      for (const json& t : ct) {
        if (t.is_object() && t.value("name", "") == "default" && t.contains("template")) {
          spec->chat_template = t["template"].get<std::string>();
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenizerSpec> SpecFromJson(const std::string& tokenizer_json,
                                           const std::string& tokenizer_config_json_or_empty) {
  HfFiles f;
  TokenizerSpec spec;
  if (absl::Status s = ParseFiles(tokenizer_json, tokenizer_config_json_or_empty, &f); !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadVocabulary(&f, &spec); !s.ok()) return s;
  for (auto step : {ReadMerges, ChooseKind, ReadPostProcessor, ApplyConfig}) {
    if (absl::Status s = step(f, &spec); !s.ok()) return s;
  }
  AddEndOfTurnTokens(&spec);  // the rule GGUF files follow too
  return spec;
}

}  // namespace

absl::StatusOr<TokenizerSpec> TokenizerSpecFromHfFiles(
    const std::string& tokenizer_json, const std::string& tokenizer_config_json_or_empty) {
  try {
    return SpecFromJson(tokenizer_json, tokenizer_config_json_or_empty);
  } catch (const nlohmann::json::exception& e) {
    return Bad(absl::StrCat("unexpected structure: ", e.what()));
  }
}

}  // namespace pinfer
