// Deterministic mutation testing of the GGUF reader: thousands of seeded byte flips,
// truncations, insertions and "interesting" integer overwrites of valid images. Each mutant
// must parse to ok or an error, never crash; an accepted file must keep every invariant the
// reader promises (tensor data inside the file, aligned offsets).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/gguf.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

std::vector<uint8_t> SmallValidFile() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetU32("llama.block_count", 2);
  w.SetF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "b"});
  w.SetF32Array("tokenizer.ggml.scores", {0, 0, 0, -1, -2});
  w.Set("nested", GgufValue::Array(GgufType::kArray,
                                   {GgufValue::Array(GgufType::kI16, {GgufValue::I16(3)})}));
  EXPECT_TRUE(w.AddTensor("a", GgmlType::kF32, {8, 2}, std::vector<uint8_t>(64, 1)).ok());
  EXPECT_TRUE(w.AddTensor("b", GgmlType::kQ8_0, {32, 2}, std::vector<uint8_t>(68, 2)).ok());
  EXPECT_TRUE(w.AddTensor("c", GgmlType::kF16, {5}, std::vector<uint8_t>(10, 3)).ok());
  return *w.WriteToBytes();
}

// Parses one mutant; on success reads every tensor byte and metadata value.
uint64_t ParseAndTouch(std::vector<uint8_t> bytes) {
  const size_t size = bytes.size();
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(std::move(bytes));
  if (!f.ok()) {
    EXPECT_FALSE(f.status().message().empty());
    return 0;
  }
  uint64_t sum = 0;
  for (const GgufKV& kv : (*f)->metadata()) sum += kv.key.size() + kv.value.arr.size();
  for (const GgufTensorInfo& t : (*f)->tensors()) {
    EXPECT_EQ(t.offset % (*f)->alignment(), 0u);
    EXPECT_LE((*f)->data_offset() + t.offset + t.nbytes, size);
    const uint8_t* p = (*f)->data(t);
    for (uint64_t k = 0; k < t.nbytes; ++k) sum += p[k];
  }
  return sum;
}

void Mutate(std::vector<uint8_t>* b, std::mt19937_64& rng) {
  static constexpr uint64_t kInteresting[] = {
      0,    1,    2,       3,          4,          5,          9,          31,         32,   33,
      0x7f, 0xff, 0x10000, 0x7fffffff, 0xffffffff, 1ull << 32, 1ull << 62, ~0ull >> 1, ~0ull};
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const int ops = 1 + static_cast<int>(rng() % 4);
  for (int op = 0; op < ops; ++op) {
    switch (rng() % 6) {
      case 0:  // random byte
        if (!b->empty()) (*b)[pick(b->size())] = static_cast<uint8_t>(rng());
        break;
      case 1:  // bit flip
        if (!b->empty()) (*b)[pick(b->size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 2:  // truncate
        b->resize(pick(b->size() + 1));
        break;
      case 3: {  // insert 1..16 random bytes
        const size_t at = pick(b->size() + 1);
        std::vector<uint8_t> ins(1 + pick(16));
        for (uint8_t& x : ins) x = static_cast<uint8_t>(rng());
        b->insert(b->begin() + static_cast<std::ptrdiff_t>(at), ins.begin(), ins.end());
        break;
      }
      case 4: {  // erase a range
        if (b->empty()) break;
        const size_t at = pick(b->size());
        const size_t n = std::min(b->size() - at, 1 + pick(16));
        b->erase(b->begin() + static_cast<std::ptrdiff_t>(at),
                 b->begin() + static_cast<std::ptrdiff_t>(at + n));
        break;
      }
      default: {  // an interesting u32 or u64 over a field
        const size_t width = (rng() & 1) ? 8 : 4;
        if (b->size() < width) break;
        const size_t at = pick(b->size() - width + 1);
        const uint64_t v = kInteresting[pick(std::size(kInteresting))];
        for (size_t k = 0; k < width; ++k) (*b)[at + k] = static_cast<uint8_t>(v >> (8 * k));
        break;
      }
    }
  }
}

void RunMutations(const std::vector<uint8_t>& seed_file, int n, uint64_t seed, int* accepted) {
  std::mt19937_64 rng(seed);
  for (int k = 0; k < n; ++k) {
    std::vector<uint8_t> m = seed_file;
    Mutate(&m, rng);
    if (ParseAndTouch(std::move(m)) > 0) ++*accepted;
    if (::testing::Test::HasFailure()) {
      FAIL() << "mutant " << k << " of seed " << seed << " broke an invariant";
    }
  }
}

TEST(GgufMutation, SmallWrittenFile) {
  const std::vector<uint8_t> file = SmallValidFile();
  ASSERT_GT(ParseAndTouch(file), 0u);
  int accepted = 0;
  RunMutations(file, 60000, 1234, &accepted);
  std::printf("%d of 60000 mutants accepted\n", accepted);
  // Flips inside tensor data or metadata strings leave valid files: some must pass.
  EXPECT_GT(accepted, 100);
}

TEST(GgufMutation, Stories260KFirst64KiB) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> head(64 * 1024);
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  ASSERT_EQ(in.gcount(), static_cast<std::streamsize>(head.size()));
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(head);
  ASSERT_FALSE(f.ok());  // tensor data lies past the cut
  EXPECT_NE(f.status().message().find("runs past the end of the file (65536 bytes)"),
            std::string::npos)
      << f.status();
  int accepted = 0;
  RunMutations(head, 10000, 5678, &accepted);
}

}  // namespace
}  // namespace pinfer
