#include "bench/serve/prompts.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "bench/serve/workload.h"

namespace pinfer::bench_serve {
namespace {

constexpr const char* kWords[] = {
    "the",    "little",  "girl",  "boy",    "dog",   "cat",   "bird", "tree",  "house", "garden",
    "sun",    "moon",    "star",  "water",  "river", "park",  "ball", "toy",   "happy", "sad",
    "big",    "small",   "red",   "blue",   "green", "warm",  "cold", "day",   "night", "friend",
    "mother", "father",  "play",  "run",    "jump",  "walk",  "look", "see",   "find",  "help",
    "make",   "want",    "like",  "love",   "went",  "came",  "said", "saw",   "found", "took",
    "gave",   "had",     "was",   "were",   "is",    "are",   "and",  "but",   "so",    "then",
    "when",   "because", "after", "before", "with",  "under", "over", "into",  "out",   "of",
    "to",     "in",      "on",    "at",     "for",   "from",  "a",    "one",   "two",   "three",
    "many",   "very",    "too",   "again",  "every", "some",  "all",  "new",   "old",   "good",
    "kind",   "brave",   "funny", "quiet",  "loud",  "soft",  "fast", "slow",  "sky",   "rain",
    "snow",   "flower",  "apple", "cake",   "bread", "milk",  "book", "box",   "door",  "window",
    "car",    "boat",    "hat",   "shoe",   "bed",   "story", "song", "smile", "laugh", "cry",
    "think",  "know",    "feel",  "wish",   "hope",  "share",
};
constexpr int kNumWords = sizeof(kWords) / sizeof(kWords[0]);

// The first n of a seeded word sequence, joined with spaces.
std::string Join(const std::vector<int>& words, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i) s.push_back(' ');
    s += kWords[words[i]];
  }
  return s;
}

}  // namespace

std::string SeededWords(uint64_t seed, int count) {
  Rng rng(seed);
  std::vector<int> words(std::max(count, 0));
  for (int& w : words) w = static_cast<int>(rng.Between(0, kNumWords - 1));
  return Join(words, count);
}

absl::StatusOr<std::vector<int32_t>> VocabPool(int vocab_size, int first_id) {
  if (vocab_size <= first_id) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab-size ", vocab_size, " leaves no token ids to draw from (ids start at ", first_id,
        ", after the special tokens)"));
  }
  std::vector<int32_t> pool(vocab_size - first_id);
  for (int i = 0; i < vocab_size - first_id; ++i) pool[i] = first_id + i;
  return pool;
}

absl::StatusOr<std::vector<int32_t>> TokenizerPool(const TokenizeFn& tokenize, uint64_t seed) {
  auto ids = tokenize(SeededWords(SubSeed(seed, 3), 2000), /*add_special=*/false);
  if (!ids.ok()) return ids.status();
  std::vector<int32_t> pool = *ids;
  std::sort(pool.begin(), pool.end());
  pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
  if (pool.empty()) return absl::InternalError("the server's tokenizer returned no tokens");
  return pool;
}

std::vector<int32_t> IdsPrompt(const std::vector<int32_t>& pool, uint64_t seed, int index,
                               int len) {
  Rng rng(SubSeed(seed, 4, static_cast<uint64_t>(index)));
  std::vector<int32_t> ids(std::max(len, 0));
  const int64_t last = static_cast<int64_t>(pool.size()) - 1;
  for (int32_t& id : ids) id = pool[rng.Between(0, last)];
  return ids;
}

absl::StatusOr<TextPrompt> FitTextPrompt(const TokenizeFn& tokenize, uint64_t seed, int index,
                                         int target_len) {
  Rng rng(SubSeed(seed, 5, static_cast<uint64_t>(index)));
  std::vector<int> words;
  auto count = [&](int n) -> absl::StatusOr<int> {
    while (static_cast<int>(words.size()) < n) {
      words.push_back(static_cast<int>(rng.Between(0, kNumWords - 1)));
    }
    auto ids = tokenize(Join(words, n), /*add_special=*/true);
    if (!ids.ok()) return ids.status();
    return static_cast<int>(ids->size());
  };
  // Invariant: count(lo) <= target (lo >= 1 once found), count(hi) > target.
  int lo = 0, c_lo = 0, hi = -1, c_hi = 0;
  int k = std::max(1, target_len / 2);
  const int cap = 4 * target_len + 16;  // every word is at least one token
  while (hi < 0) {
    auto c = count(k);
    if (!c.ok()) return c.status();
    if (*c <= target_len) {
      lo = k, c_lo = *c;
      if (k >= cap) break;
      // Extrapolate from tokens per word, at least doubling the distance left.
      const double per_word = std::max(1e-3, static_cast<double>(*c) / k);
      k = std::min(cap, std::max(k + 1, static_cast<int>(target_len / per_word) + 1));
    } else {
      hi = k, c_hi = *c;
    }
  }
  while (hi - lo > 1) {
    // Interpolate where the count crosses target, kept strictly inside (lo, hi).
    const double frac = c_hi > c_lo ? static_cast<double>(target_len - c_lo) / (c_hi - c_lo) : 0.5;
    int mid = lo + static_cast<int>(frac * (hi - lo));
    mid = std::clamp(mid, lo + 1, hi - 1);
    auto c = count(mid);
    if (!c.ok()) return c.status();
    if (*c <= target_len) {
      lo = mid, c_lo = *c;
    } else {
      hi = mid, c_hi = *c;
    }
  }
  TextPrompt p;
  if (lo == 0) {  // even one word is longer than the target
    p.text = Join(words, 1);
    p.tokens = c_hi;
    return p;
  }
  p.text = Join(words, lo);
  p.tokens = c_lo;
  return p;
}

}  // namespace pinfer::bench_serve
