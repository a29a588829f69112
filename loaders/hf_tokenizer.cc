#include "loaders/hf_tokenizer.h"

#include <algorithm>
#include <functional>
#include <map>

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

absl::StatusOr<TokenizerSpec> SpecFromJson(const std::string& tokenizer_json,
                                           const std::string& tokenizer_config_json_or_empty) {
  // Size and nesting bounded before anything is built (json_strict.h), so the walks below
  // (ForEach's recursion, dump()) stay shallow whatever the file holds.
  absl::StatusOr<json> parsed = ParseJson(tokenizer_json, "tokenizer.json", kTokenizerJsonLimits);
  if (!parsed.ok()) return parsed.status();
  const json j = std::move(*parsed);
  if (!j.is_object()) return Bad("not a JSON object");
  json cfg = json::object();
  if (!tokenizer_config_json_or_empty.empty()) {
    JsonLimits cfg_limits = kConfigJsonLimits;
    cfg_limits.refuse_duplicate_keys = false;
    absl::StatusOr<json> c =
        ParseJson(tokenizer_config_json_or_empty, "tokenizer_config.json", cfg_limits);
    if (!c.ok()) return c.status();
    cfg = std::move(*c);
    if (!cfg.is_object()) {
      return absl::InvalidArgumentError("tokenizer_config.json: not a JSON object");
    }
  }
  if (!j.contains("model") || !j["model"].is_object()) return Bad("no \"model\" object");
  const json& model = j["model"];
  const std::string type = model.value("type", model.contains("merges") ? "BPE" : "");
  if (type != "BPE") {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.json: model type \"", type, "\" is not supported (only BPE)"));
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) return Bad("model.vocab missing");

  // Vocabulary: model.vocab plus added_tokens, by id.
  std::map<int64_t, std::string> by_id;
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it.value().is_number_integer()) return Bad(absl::StrCat("vocab id of ", it.key()));
    by_id[it.value().get<int64_t>()] = it.key();
  }
  std::map<int64_t, bool> added;  // id -> special
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const json& t : j["added_tokens"]) {
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
  TokenizerSpec spec;
  const size_t n = (size_t)by_id.rbegin()->first + 1;
  spec.tokens.assign(n, "");
  spec.types.assign(n, TokenType::kUnused);  // holes in the id space stay unused
  std::map<std::string, int32_t> id_of;
  for (const auto& [id, text] : by_id) {
    spec.tokens[id] = text;
    spec.types[id] = TokenType::kNormal;
    id_of.emplace(text, (int32_t)id);
  }
  for (const auto& [id, special] : added) {
    spec.types[id] = special ? TokenType::kControl : TokenType::kUserDefined;
  }
  auto find_id = [&](const std::string& text) -> int32_t {
    auto it = id_of.find(text);
    return it == id_of.end() ? -1 : it->second;
  };

  // Merges: "a b" strings or [a, b] pairs.
  if (model.contains("merges") && model["merges"].is_array()) {
    spec.merges.reserve(model["merges"].size());
    for (const json& m : model["merges"]) {
      if (m.is_string()) {
        spec.merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        spec.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      } else {
        return Bad("a merge is neither \"a b\" nor [a, b]");
      }
    }
  }
  spec.ignore_merges = model.value("ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    spec.unk_id = find_id(model["unk_token"].get<std::string>());
    if (spec.unk_id >= 0) spec.types[spec.unk_id] = TokenType::kUnknown;
  }

  // Which kind: byte-level BPE, or Llama-2's "▁" layout.
  bool byte_level = false, metaspace = false, prepend = false;
  std::string split_regex;
  const json null_node;
  const json& pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : null_node;
  const json& norm = j.contains("normalizer") ? j["normalizer"] : null_node;
  bool byte_level_regex = false;
  ForEach(pre, "pretokenizers", [&](const json& p) {
    const std::string t = p.value("type", "");
    if (t == "ByteLevel") {
      byte_level = true;
      byte_level_regex = p.value("use_regex", true);
    } else if (t == "Split" && p.contains("pattern") && p["pattern"].contains("Regex")) {
      split_regex = p["pattern"]["Regex"].get<std::string>();
    } else if (t == "Metaspace") {
      metaspace = true;
      prepend = p.value("add_prefix_space", p.value("prepend_scheme", "always") != "never");
    }
  });
  ForEach(norm, "normalizers", [&](const json& p) {
    const std::string t = p.value("type", "");
    if (t == "Prepend" && p.value("prepend", "") == kSpaceMark) prepend = metaspace = true;
    if (t == "Replace" && p.value("content", "") == kSpaceMark) metaspace = true;
  });
  const bool byte_fallback = model.value("byte_fallback", false);
  if (byte_level) {
    spec.kind = TokenizerSpec::Kind::kBytePairGpt2;
    spec.add_space_prefix = false;
    if (!split_regex.empty()) {
      auto name = PreFromRegex(split_regex);
      if (!name.ok()) return name.status();
      spec.pre = *name;
    } else if (byte_level_regex) {
      spec.pre = "gpt2";
    } else {
      return absl::UnimplementedError(
          "tokenizer.json: ByteLevel without a regex split is not supported");
    }
  } else if (metaspace || byte_fallback) {
    spec.kind = TokenizerSpec::Kind::kSentencePiece;
    spec.add_space_prefix = prepend;
    for (size_t id = 0; id < n; ++id) {
      const std::string& s = spec.tokens[id];
      if (spec.types[id] == TokenType::kNormal && s.size() == 6 && s.rfind("<0x", 0) == 0 &&
          s[5] == '>') {
        spec.types[id] = TokenType::kByte;
      }
    }
  } else {
    return absl::UnimplementedError(
        "tokenizer.json: a BPE model needs a ByteLevel pre-tokenizer or the Llama-2 "
        "\"\xE2\x96\x81\" normaliser / byte fallback");
  }

  // Special tokens: post_processor template first, then tokenizer_config.json overrides.
  spec.add_bos = false;
  if (j.contains("post_processor") && j["post_processor"].is_object()) {
    const json& pp = j["post_processor"];
    if (pp.value("type", "") == "TemplateProcessing" && pp.contains("single") &&
        pp["single"].is_array() && !pp["single"].empty()) {
      const json& single = pp["single"];
      auto special_of = [&](const json& item) -> int32_t {
        if (!item.is_object() || !item.contains("SpecialToken")) return -1;
        return find_id(item["SpecialToken"].value("id", ""));
      };
      if (int32_t b = special_of(single.front()); b >= 0) {
        spec.bos_id = b;
        spec.add_bos = true;
      }
      if (single.size() > 1) {
        if (int32_t e = special_of(single.back()); e >= 0) {
          spec.eos_id = e;
          spec.add_eos = true;
        }
      }
    }
  }
  for (auto [key, out] :
       {std::pair{"bos_token", &spec.bos_id}, std::pair{"eos_token", &spec.eos_id},
        std::pair{"pad_token", &spec.pad_id}}) {
    if (!cfg.contains(key)) continue;
    const std::string text = TokenText(cfg[key]);
    if (text.empty()) continue;
    const int32_t id = find_id(text);
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer_config.json: ", key, " \"", text, "\" is not in the vocabulary"));
    }
    *out = id;
  }
  if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
    spec.add_bos = cfg["add_bos_token"].get<bool>();
  }
  if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean()) {
    spec.add_eos = cfg["add_eos_token"].get<bool>();
  }
  if (spec.bos_id < 0) spec.add_bos = false;
  if (spec.eos_id < 0) spec.add_eos = false;
  if (cfg.contains("chat_template")) {
    const json& ct = cfg["chat_template"];
    if (ct.is_string()) {
      spec.chat_template = ct.get<std::string>();
    } else if (ct.is_array()) {
      for (const json& t : ct) {
        if (t.is_object() && t.value("name", "") == "default" && t.contains("template")) {
          spec.chat_template = t["template"].get<std::string>();
        }
      }
    }
  }
  // Conventional end-of-turn tokens also end generation.
  for (const char* text : {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|endoftext|>",
                           "<|end_of_text|>", "<end_of_turn>", "<|end|>"}) {
    const int32_t id = find_id(text);
    if (id >= 0 && id != spec.eos_id && spec.types[id] == TokenType::kControl) {
      spec.eog_ids.push_back(id);
    }
  }
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
