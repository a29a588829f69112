// Vocabulary, random rows and file type ids of synthetic models.
#include "engine/synth/synth_data.h"

#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pinfer {
namespace {

constexpr std::string_view kWordPrefix = "\xE2\x96\x81";  // "▁" U+2581

// A small list of frequent English words (the synthetic vocabulary's first words).
constexpr std::string_view kCommonWords[] = {
    "the",     "of",      "and",    "to",    "in",     "is",     "was",     "that",    "for",
    "it",      "with",    "as",     "on",    "be",     "at",     "by",      "this",    "had",
    "not",     "are",     "but",    "from",  "or",     "have",   "an",      "they",    "which",
    "one",     "you",     "were",   "her",   "all",    "she",    "there",   "would",   "their",
    "we",      "him",     "been",   "has",   "when",   "who",    "will",    "more",    "no",
    "if",      "out",     "so",     "said",  "what",   "up",     "its",     "about",   "into",
    "than",    "them",    "can",    "only",  "other",  "new",    "some",    "could",   "time",
    "these",   "two",     "may",    "then",  "do",     "first",  "any",     "my",      "now",
    "such",    "like",    "our",    "over",  "man",    "me",     "even",    "most",    "made",
    "after",   "also",    "did",    "many",  "before", "must",   "through", "back",    "years",
    "where",   "much",    "your",   "way",   "well",   "down",   "should",  "because", "each",
    "just",    "those",   "people", "how",   "too",    "little", "state",   "good",    "very",
    "make",    "world",   "still",  "own",   "see",    "men",    "work",    "long",    "get",
    "here",    "between", "both",   "life",  "being",  "under",  "never",   "day",     "same",
    "another", "know",    "while",  "last",  "Once",   "upon",   "a",       "The",     "I",
    "He",      "She",     "It",     "story", "little",
};

constexpr std::string_view kConsonants[] = {"b", "c",  "d",  "f",  "g",  "h", "k", "l",
                                            "m", "n",  "p",  "r",  "s",  "t", "v", "w",
                                            "z", "ch", "sh", "th", "st", "tr"};
constexpr std::string_view kVowels[] = {"a", "e", "i", "o", "u", "ea", "ou"};

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

absl::StatusOr<TokenizerSpec> SynthVocabulary(int n_vocab, std::string_view arch) {
  const bool end_of_text = arch == "phi3";
  const int n_special = 3 + (end_of_text ? 1 : 0);
  if (n_vocab < n_special + 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("a vocabulary of ", n_vocab, " tokens cannot hold the ", n_special,
                     " special and 256 byte tokens; use at least ", n_special + 256));
  }
  const int n_pieces = n_vocab - (end_of_text ? 1 : 0);
  TokenizerSpec spec;
  spec.kind = TokenizerSpec::Kind::kSentencePiece;
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.tokens = {"<unk>", "<s>", "</s>"};
  spec.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (int b = 0; b < 256; ++b) {
    spec.tokens.push_back(absl::StrFormat("<0x%02X>", b));
    spec.types.push_back(TokenType::kByte);
  }
  spec.scores.assign(spec.tokens.size(), 0.0f);

  std::unordered_set<std::string> seen(spec.tokens.begin(), spec.tokens.end());
  float score = 0.0f;
  auto add = [&](std::string piece) {
    if (static_cast<int>(spec.tokens.size()) >= n_pieces || !seen.insert(piece).second) return;
    spec.tokens.push_back(std::move(piece));
    spec.types.push_back(TokenType::kNormal);
    spec.scores.push_back(score);
    score -= 1.0f;
  };
  add(std::string(kWordPrefix));
  for (char ch :
       std::string_view("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")) {
    add(std::string(1, ch));
    add(std::string(kWordPrefix) + ch);
  }
  for (char ch : std::string_view(".,!?;:'\"-()")) add(std::string(1, ch));
  for (std::string_view w : kCommonWords) add(std::string(kWordPrefix).append(w));
  // Syllable words of 1, 2, 3, ... syllables, in a fixed order, until the vocabulary is full.
  constexpr int kC = sizeof(kConsonants) / sizeof(kConsonants[0]);
  constexpr int kV = sizeof(kVowels) / sizeof(kVowels[0]);
  for (int syllables = 1; static_cast<int>(spec.tokens.size()) < n_pieces; ++syllables) {
    int64_t combos = 1;
    for (int s = 0; s < syllables; ++s) combos *= kC * kV;
    for (int64_t i = 0; i < combos && static_cast<int>(spec.tokens.size()) < n_pieces; ++i) {
      std::string word;
      for (int64_t rest = i, s = 0; s < syllables; ++s, rest /= kC * kV) {
        word.append(kConsonants[rest % (kC * kV) / kV]).append(kVowels[rest % kV]);
      }
      add(std::string(kWordPrefix) + word);
      add(word);
    }
  }
  if (end_of_text) {
    spec.tokens.push_back("<|endoftext|>");
    spec.types.push_back(TokenType::kControl);
    spec.scores.push_back(0.0f);
  }
  return spec;
}

void SynthRow(uint64_t seed, uint64_t tensor_index, int64_t row, float mean, float stddev,
              float* out, int64_t n) {
  uint64_t sm = seed ^ (tensor_index * 0xD1B54A32D192ED03ull) ^
                (static_cast<uint64_t>(row) * 0x8CB92BA72F3D8DD7ull);
  uint64_t s0 = SplitMix64(sm), s1 = SplitMix64(sm), s2 = SplitMix64(sm), s3 = SplitMix64(sm);
  // z = (sum of four (k + 0.5) / 65536 - 2) x sqrt(3): mean 0, variance 1.
  const float scale = stddev * 1.7320508f / 65536.0f;
  const float offset = mean - stddev * 1.7320508f * (2.0f - 4.0f * 0.5f / 65536.0f);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = s0 + s3;  // xoshiro256+
    const uint64_t t = s1 << 17;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = Rotl(s3, 45);
    const uint32_t sum = static_cast<uint32_t>(r & 0xFFFF) +
                         static_cast<uint32_t>((r >> 16) & 0xFFFF) +
                         static_cast<uint32_t>((r >> 32) & 0xFFFF) + static_cast<uint32_t>(r >> 48);
    out[i] = offset + scale * static_cast<float>(sum);
  }
}

SynthInit SynthInitFor(const TensorPlan& t, bool varied_norms) {
  const std::string_view name = t.name;
  if (name.find("_norm.") != std::string_view::npos) return {1.0f, varied_norms ? 0.1f : 0.0f};
  if (name.size() >= 5 && name.substr(name.size() - 5) == ".bias") return {0.0f, 0.01f};
  return {0.0f, 0.02f};
}

}  // namespace pinfer
