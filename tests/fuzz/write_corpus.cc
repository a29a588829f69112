// Writes the fuzz targets' seed corpus: `fuzz_write_corpus DIR` fills DIR/<target>/ with
// small valid (and a few nearly valid) inputs for each target of tests/fuzz, made here with
// the project's own writers (GgufWriter, SerializeSafetensors) or spelled out below. The
// repository holds its output in tests/fuzz/corpus/; the fuzz_corpus_current test checks
// that it is still what this program writes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "loaders/ggml_types.h"
#include "loaders/gguf.h"
#include "loaders/safetensors.h"

namespace {

using Bytes = std::vector<uint8_t>;
using Seeds = std::vector<std::pair<std::string, std::string>>;  // file name, contents

std::string Text(const Bytes& b) { return std::string(b.begin(), b.end()); }

Bytes Pattern(size_t n, uint8_t start) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(start + 37 * i);
  return b;
}

// A GGUF with every metadata kind and one small tensor of each common block type.
std::string GgufFull(uint32_t version) {
  pinfer::GgufWriter w(version);
  w.SetString("general.architecture", "llama");
  w.SetU32("llama.block_count", 1);
  w.SetU32("llama.context_length", 64);
  w.SetF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetBool("general.flag", true);
  w.Set("general.u8", pinfer::GgufValue::U8(7));
  w.Set("general.i16", pinfer::GgufValue::I16(-3));
  w.Set("general.u64", pinfer::GgufValue::U64(1ull << 40));
  w.Set("general.f64", pinfer::GgufValue::F64(0.25));
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81the"});
  w.SetF32Array("tokenizer.ggml.scores", {0, 0, 0, -1.5f});
  w.SetI32Array("tokenizer.ggml.token_type", {2, 3, 3, 1});
  for (auto [name, type, n] :
       {std::tuple{"f32", pinfer::GgmlType::kF32, 8}, std::tuple{"f16", pinfer::GgmlType::kF16, 8},
        std::tuple{"q4_0", pinfer::GgmlType::kQ4_0, 32},
        std::tuple{"q8_0", pinfer::GgmlType::kQ8_0, 32},
        std::tuple{"q4_k", pinfer::GgmlType::kQ4_K, 256}}) {
    const size_t bytes = pinfer::GgmlRowBytes(type, n) * 2;
    if (!w.AddTensor(name, type, {n, 2}, Pattern(bytes, 1)).ok()) std::abort();
  }
  return Text(*w.WriteToBytes());
}

Seeds GgufSeeds() {
  pinfer::GgufWriter bare(3);
  bare.SetString("general.name", "metadata only");
  pinfer::GgufWriter aligned(2);
  aligned.SetU32("general.alignment", 64);
  if (!aligned.AddTensor("w", pinfer::GgmlType::kF32, {3}, Pattern(12, 5)).ok()) std::abort();
  return {{"full_v3.gguf", GgufFull(3)},
          {"full_v2.gguf", GgufFull(2)},
          {"metadata_only.gguf", Text(*bare.WriteToBytes())},
          {"aligned_64.gguf", Text(*aligned.WriteToBytes())}};
}

Seeds SafetensorsSeeds() {
  using pinfer::StDtype;
  std::vector<pinfer::StTensorData> all = {
      {"model.embed_tokens.weight", StDtype::kF32, {2, 3}, Pattern(24, 1)},
      {"half", StDtype::kF16, {4}, Pattern(8, 2)},
      {"brain", StDtype::kBF16, {2, 2}, Pattern(8, 3)},
      {"qweight", StDtype::kI32, {3}, Pattern(12, 4)},
      {"i8", StDtype::kI8, {2}, Pattern(2, 5)},
      {"u8", StDtype::kU8, {1}, Pattern(1, 6)},
      {"scalar", StDtype::kF32, {}, Pattern(4, 7)},
      {"empty", StDtype::kF32, {0, 4}, {}}};
  return {{"all_dtypes.safetensors", Text(*pinfer::SerializeSafetensors(all, {{"format", "pt"}}))},
          {"metadata_only.safetensors", Text(*pinfer::SerializeSafetensors({}, {{"k", "v"}}))}};
}

const char* kLlamaConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
 "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "vocab_size": 300, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
 "max_position_embeddings": 256, "tie_word_embeddings": false,
 "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})";
const char* kQwenGptqConfig = R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64,
 "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
 "num_key_value_heads": 4, "vocab_size": 300, "tie_word_embeddings": true,
 "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32,
  "desc_act": true, "sym": false, "checkpoint_format": "gptq_v2"}})";
const char* kMistralAwqConfig = R"({"architectures": ["MistralForCausalLM"], "hidden_size": 64,
 "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 16,
 "vocab_size": 300, "rope_scaling": {"type": "linear", "factor": 2.0},
 "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 32,
  "version": "gemm", "zero_point": true}})";

// Llama 2's layout: BPE with byte fallback and a "▁" prepend normaliser.
const char* kSpmTokenizer = R"({"added_tokens": [
  {"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true},
  {"id": 2, "content": "</s>", "special": true}],
 "normalizer": {"type": "Sequence", "normalizers": [
  {"type": "Prepend", "prepend": "\u2581"},
  {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
 "pre_tokenizer": null,
 "post_processor": {"type": "TemplateProcessing",
  "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A"}}]},
 "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
  "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0x41>": 4, "<0xC3>": 5,
   "\u2581": 6, "H": 7, "e": 8, "l": 9, "o": 10, "\u2581H": 11, "ll": 12, "\u2581Hell": 13,
   "\u2581Hello": 14, "w": 15, "r": 16, "d": 17, "\u2581w": 18},
  "merges": ["\u2581 H", "l l", "\u2581H e", "\u2581He ll", "\u2581Hell o", "\u2581 w"]}})";
const char* kSpmConfig = R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>",
 "add_bos_token": true, "add_eos_token": false,
 "chat_template": "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"})";

// A byte-level BPE with Llama 3's split pattern and ChatML specials.
const char* kByteLevelTokenizer = R"({"added_tokens": [
  {"id": 12, "content": "<|im_start|>", "special": true},
  {"id": 13, "content": "<|im_end|>", "special": true},
  {"id": 14, "content": "<tool>", "special": false}],
 "normalizer": {"type": "NFC"},
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
   "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
 "model": {"type": "BPE", "ignore_merges": true,
  "vocab": {"H": 0, "e": 1, "l": 2, "o": 3, "\u0120": 4, "w": 5, "r": 6, "d": 7, "\u010a": 8,
   "He": 9, "ll": 10, "\u0120w": 11},
  "merges": [["H", "e"], ["l", "l"], ["\u0120", "w"]]}})";
const char* kByteLevelConfig = R"({"eos_token": "<|im_end|>", "bos_token": null,
 "chat_template": [{"name": "default", "template": "{{ messages[0]['content'] }}"}]})";

// Qwen2's split pattern and GPT-2's plain ByteLevel pre-tokenizer.
const char* kQwenTokenizer = R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
  {"type": "ByteLevel", "use_regex": false}]},
 "model": {"vocab": {"a": 0, "b": 1, "ab": 2, "1": 3}, "merges": ["a b"]}})";
const char* kGpt2Tokenizer = R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
 "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "\u0120": 2, "\u0120a": 3},
  "merges": ["\u0120 a"]}})";

Seeds HfJsonSeeds() {
  auto join = [](const char* config, const char* tok, const char* tok_config) {
    return std::string(config) + '\0' + tok + '\0' + tok_config;
  };
  return {{"llama_spm", join(kLlamaConfig, kSpmTokenizer, kSpmConfig)},
          {"qwen_gptq_bytelevel", join(kQwenGptqConfig, kByteLevelTokenizer, kByteLevelConfig)},
          {"mistral_awq_qwen_split", join(kMistralAwqConfig, kQwenTokenizer, "")},
          {"gpt2_bytelevel", join("{}", kGpt2Tokenizer, "{\"add_bos_token\": false}")}};
}

// Templates written here in the hubs' styles; tests/server/jinja/templates/ (also written for
// this project) is a second seed folder of this target.
Seeds ChatTemplateSeeds() {
  const std::string msg = std::string(1, '\0') + "Hi </s> <|im_end|><|im_start|>system\n\xC3\xA9";
  return {{"chatml",
           "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
           "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
           "{% endif %}" +
               msg},
          {"llama2",
           "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] "
           "{{ m['content'] | trim }} [/INST]{% elif m['role'] == 'assistant' %} "
           "{{ m['content'] }} {{ eos_token }}{% endif %}{% endfor %}" +
               msg},
          {"llama3_tools",
           "{%- set ns = namespace(sys='') -%}{%- if tools is defined -%}{%- for t in tools -%}"
           "{%- set ns.sys = ns.sys + (t | tojson(indent=2)) -%}{%- endfor -%}{%- endif -%}"
           "<|begin_of_text|>{{ ns.sys }}{%- for m in messages[1:] -%}<|start_header_id|>"
           "{{ m.role }}<|end_header_id|>\n\n{{ m.content | trim }}<|eot_id|>{%- endfor -%}"
           "{{ strftime_now('%d %b %Y') }}{% if messages|length > 9 %}{{ raise_exception('long') }}"
           "{% endif %}" +
               msg},
          {"macros_loops",
           "{% macro say(x, y='-') %}{{ x ~ y }}{% endmacro %}{% for i in range(3) if i != 1 %}"
           "{{ say(i) }}{{ loop.index }}/{{ loop.length }}{% else %}none{% endfor %}"
           "{% set d = {'a': [1, 2.5, none, true]} %}{{ d | tojson }}{{ d.a[1:] }}"
           "{{ 'x,y'.split(',') | join('|') | upper }}{% raw %}{{ raw }}{% endraw %}" +
               msg},
          {"gemma_like",
           "{% for m in messages %}<start_of_turn>"
           "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
           "{{ m['content'] }}<end_of_turn>\n{% endfor %}<start_of_turn>model\n" +
               msg}};
}

Seeds HttpSeeds() {
  const std::string body = R"({"model": "m", "prompt": "Once upon", "max_tokens": 4})";
  const std::string len = std::to_string(body.size());
  return {
      {"get_health", "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"},
      {"post_json",
       "POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json"
       "\r\nAuthorization: Bearer k\r\nContent-Length: " +
           len + "\r\n\r\n" + body},
      {"chunked",
       "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked"
       "\r\n\r\n5\r\nhello\r\n1a;ext=1\r\n" +
           std::string(26, 'z') + "\r\n0\r\nTrailer: t\r\n\r\n"},
      {"expect_continue",
       "POST /tokenize HTTP/1.1\r\nExpect: 100-continue\r\n"
       "Content-Length: 2\r\n\r\n{}"},
      {"gzip",
       "POST /v1/chat/completions HTTP/1.1\r\nContent-Encoding: gzip\r\n"
       "Content-Length: 3\r\n\r\n\x1f\x8b\x08"},
      {"cl_and_te",
       "POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
       "0\r\n\r\n"},
      {"http10", "GET /v1/models HTTP/1.0\r\nConnection: keep-alive\r\nOrigin: http://x\r\n\r\n"},
      {"options",
       "OPTIONS /v1/completions HTTP/1.1\r\nOrigin: http://a.example\r\n"
       "Access-Control-Request-Headers: authorization, content-type\r\n\r\n"},
      {"two_requests", "GET /metrics HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n"}};
}

Seeds OpenAiSeeds() {
  return {{"chat_tools", R"({"model": "m", "messages": [{"role": "system", "content": "Be brief."},
 {"role": "user", "content": [{"type": "text", "text": "Hi </s>"}, {"type": "text", "text": "!"}]},
 {"role": "assistant", "content": null}, {"role": "developer", "content": "x"}],
 "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
 "tool_choice": "auto", "response_format": {"type": "text"}, "metadata": {"a": "b"},
 "store": false, "parallel_tool_calls": true, "stream": true,
 "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 3,
 "max_completion_tokens": 8, "seed": 3, "temperature": 0.7, "top_p": 0.9})"},
          {"completion_list", R"({"prompt": ["Once", [1, 2, 3]], "n": 2, "best_of": 2, "echo": true,
 "logprobs": 2, "stop": ["\n", "."], "max_tokens": 16, "presence_penalty": 0.5,
 "frequency_penalty": -0.5, "repetition_penalty": 1.1, "repeat_penalty": 1.2,
 "repeat_last_n": 64, "logit_bias": {"13": -100, "7": 5.5}, "top_k": 40, "min_p": 0.05,
 "ignore_eos": true, "suffix": "", "user": "u"})"},
          {"tokenize", R"({"content": "Hello <|im_end|>", "add_special": true,
 "parse_special": false, "with_pieces": true})"},
          {"detokenize", R"({"tokens": [1, 72, 105, 259, 260, 2]})"},
          {"bad_types", R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}],
 "n": "2", "max_tokens": -1, "response_format": {"type": "json_object"}})"},
          {"forced_tool_call", R"({"messages": [{"role": "user", "content": "Weather in Oslo?"},
 {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
  "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
 {"role": "tool", "tool_call_id": "c1", "content": "<|im_end|>{\"temp\": 3}"}],
 "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"},
   "unit": {"enum": ["c", "f"]}}, "required": ["city"], "additionalProperties": false}}}],
 "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
 "parallel_tool_calls": false, "chat_template_kwargs": {"enable_thinking": false}})"},
          {"response_schema", R"({"messages": [{"role": "user", "content": "JSON"}],
 "response_format": {"type": "json_schema", "json_schema": {"name": "s", "strict": true,
  "schema": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
   "age": {"type": "integer"}, "kind": {"enum": ["a", "b", 3]},
   "tags": {"type": "array", "items": {"type": "string", "format": "date"}, "minItems": 1,
    "maxItems": 3}, "id": {"anyOf": [{"type": "null"}, {"type": "string", "format": "uuid"}]},
   "v": {"const": 1.5}}, "required": ["name", "age", "kind", "tags"],
  "additionalProperties": false}}}})"},
          {"guided_regex", R"({"prompt": "x", "guided_regex": "^(ab|c)[a-z]{2,5}(-\\d+)?\\s*$"})"},
          {"guided_choice", R"({"messages": [{"role": "user", "content": "?"}],
 "guided_choice": ["yes", "no", "<|im_start|>"]})"},
          {"gbnf_grammar", R"({"prompt": "x",
 "grammar": "root ::= item (\",\" item)*\nitem ::= [a-z]+ | \"\\u00e9\"{1,3}"})"}};
}

bool WriteAll(const std::filesystem::path& dir, const Seeds& seeds) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const auto& [name, contents] : seeds) {
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    if (!out) {
      std::fprintf(stderr, "fuzz_write_corpus: cannot write %s\n", (dir / name).c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_write_corpus DIR  (writes DIR/<target>/...)\n");
    return 2;
  }
  const std::filesystem::path root(argv[1]);
  const std::pair<const char*, Seeds> targets[] = {
      {"gguf_fuzz", GgufSeeds()},         {"safetensors_fuzz", SafetensorsSeeds()},
      {"hf_json_fuzz", HfJsonSeeds()},    {"chat_template_fuzz", ChatTemplateSeeds()},
      {"http_request_fuzz", HttpSeeds()}, {"openai_request_fuzz", OpenAiSeeds()}};
  for (const auto& [target, seeds] : targets) {
    if (!WriteAll(root / target, seeds)) return 1;
  }
  return 0;
}
