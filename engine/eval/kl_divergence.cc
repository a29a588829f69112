// KL statistics and the base log-probability file of kl_divergence.h.
#include "engine/eval/kl_divergence.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pinfer {
namespace {

constexpr char kMagic[8] = {'P', 'I', 'N', 'F', 'K', 'L', 'B', '1'};

struct Header {
  char magic[8];
  uint32_t n_vocab, n_ctx, n_chunks, first;
  uint64_t n_positions;
};
static_assert(sizeof(Header) == 32, "header is 32 bytes, no padding");

Header HeaderFor(const PerplexityPlan& plan, int n_vocab) {
  Header h;
  std::memcpy(h.magic, kMagic, 8);
  h.n_vocab = static_cast<uint32_t>(n_vocab);
  h.n_ctx = static_cast<uint32_t>(plan.n_ctx);
  h.n_chunks = static_cast<uint32_t>(plan.n_chunks);
  h.first = static_cast<uint32_t>(plan.first);
  h.n_positions = static_cast<uint64_t>(plan.scored());
  return h;
}

int Argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

}  // namespace

void KlAccumulator::Add(const float* base, const float* test, int n_vocab) {
  double kl = 0;
  for (int i = 0; i < n_vocab; ++i) {
    const double lb = base[i];
    if (lb < -30) continue;  // p < 1e-13: no measurable contribution
    kl += std::exp(lb) * (lb - test[i]);
  }
  kl_.push_back(std::max(kl, 0.0));  // rounding can leave a tiny negative for equal inputs
  if (Argmax(base, n_vocab) == Argmax(test, n_vocab)) ++same_top_;
}

KlStats KlAccumulator::Result() const {
  KlStats s;
  s.count = static_cast<int64_t>(kl_.size());
  if (s.count == 0) return s;
  double sum = 0, sum2 = 0;
  for (double v : kl_) {
    sum += v;
    sum2 += v * v;
  }
  s.mean_kl = sum / s.count;
  const double var = sum2 / s.count - s.mean_kl * s.mean_kl;
  s.kl_stderr = s.count > 1 && var > 0 ? std::sqrt(var / (s.count - 1)) : 0;
  std::vector<double> sorted = kl_;
  std::sort(sorted.begin(), sorted.end());
  const double at = 0.99 * (s.count - 1);
  const size_t lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  s.p99_kl = sorted[lo] + (at - lo) * (sorted[hi] - sorted[lo]);
  s.max_kl = sorted.back();
  s.top1_agreement = static_cast<double>(same_top_) / s.count;
  return s;
}

absl::StatusOr<std::unique_ptr<KlBaseWriter>> KlBaseWriter::Create(const std::string& path,
                                                                   const PerplexityPlan& plan,
                                                                   int n_vocab) {
  std::unique_ptr<KlBaseWriter> w(new KlBaseWriter());
  w->path_ = path;
  w->f_ = std::fopen(path.c_str(), "wb");
  if (w->f_ == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", path, ": ",
                                                    std::strerror(errno),
                                                    " (check the folder exists and is writable)"));
  }
  const Header h = HeaderFor(plan, n_vocab);
  const size_t n_tok = static_cast<size_t>(plan.n_chunks) * plan.n_ctx;
  if (std::fwrite(&h, sizeof h, 1, w->f_) != 1 ||
      std::fwrite(plan.tokens.data(), sizeof(int32_t), n_tok, w->f_) != n_tok) {
    return absl::DataLossError(absl::StrCat("short write to ", path, " (disk full?)"));
  }
  w->expected_ = plan.scored();
  return w;
}

KlBaseWriter::~KlBaseWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

absl::Status KlBaseWriter::Add(const float* log_probs, int n_vocab) {
  if (std::fwrite(log_probs, sizeof(float), n_vocab, f_) != static_cast<size_t>(n_vocab)) {
    return absl::DataLossError(absl::StrCat("short write to ", path_, " (disk full?)"));
  }
  ++written_;
  return absl::OkStatus();
}

absl::Status KlBaseWriter::Close() {
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) return absl::DataLossError(absl::StrCat("cannot finish writing ", path_));
  if (written_ != expected_) {
    return absl::InternalError(absl::StrCat(path_, ": wrote ", written_, " positions of ",
                                            expected_, "; the run stopped early, rerun it"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KlBaseReader>> KlBaseReader::Open(const std::string& path,
                                                                 const PerplexityPlan& plan,
                                                                 int n_vocab) {
  std::unique_ptr<KlBaseReader> r(new KlBaseReader());
  r->path_ = path;
  r->f_ = std::fopen(path.c_str(), "rb");
  if (r->f_ == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno),
                                            " (make it first with --kl-base ", path, ")"));
  }
  Header h;
  if (std::fread(&h, sizeof h, 1, r->f_) != 1 || std::memcmp(h.magic, kMagic, 8) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is not a pagedinfer KL base file; make one with pagedinfer perplexity --kl-base"));
  }
  const Header want = HeaderFor(plan, n_vocab);
  if (h.n_vocab != want.n_vocab || h.n_ctx != want.n_ctx || h.n_chunks != want.n_chunks ||
      h.first != want.first || h.n_positions != want.n_positions) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " holds vocab ", h.n_vocab, ", ctx ", h.n_ctx, ", ", h.n_chunks,
        " chunks; this run has vocab ", want.n_vocab, ", ctx ", want.n_ctx, ", ", want.n_chunks,
        " chunks: use the same text and --ctx as the base run, and a model with the same "
        "vocabulary"));
  }
  const size_t n_tok = static_cast<size_t>(plan.n_chunks) * plan.n_ctx;
  std::vector<int32_t> tokens(n_tok);
  if (std::fread(tokens.data(), sizeof(int32_t), n_tok, r->f_) != n_tok) {
    return absl::DataLossError(absl::StrCat(path, " is truncated; make it again"));
  }
  if (!std::equal(tokens.begin(), tokens.end(), plan.tokens.begin())) {
    return absl::FailedPreconditionError(
        absl::StrCat(path,
                     " was made from a different text or tokenizer; use the same -f TEXT and model "
                     "vocabulary as the base run"));
  }
  r->row_.resize(n_vocab);
  r->remaining_ = static_cast<int64_t>(h.n_positions);
  return r;
}

KlBaseReader::~KlBaseReader() {
  if (f_ != nullptr) std::fclose(f_);
}

absl::StatusOr<const float*> KlBaseReader::Next() {
  if (remaining_ <= 0 || std::fread(row_.data(), sizeof(float), row_.size(), f_) != row_.size()) {
    return absl::DataLossError(absl::StrCat(path_, " ended early; make it again with --kl-base"));
  }
  --remaining_;
  return row_.data();
}

}  // namespace pinfer
