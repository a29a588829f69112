// The packed layout of quants_packed.h: sizes, PackRows / UnpackRow, and the kernel tables.
#include "loaders/quants_packed.h"

#include <cstring>

#include "loaders/quants.h"
#include "loaders/quants_packed_k.h"

namespace pinfer::quants {
namespace {

// Sizes of one packed block (8 rows x 32 values) and of one original block.
int64_t PackedBlockBytes(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_0:
      return sizeof(BlockQ4_0x8);
    case GgmlType::kQ4_1:
      return sizeof(BlockQ4_1x8);
    case GgmlType::kQ8_0:
      return sizeof(BlockQ8_0x8);
    default:
      return 0;
  }
}

// Row i's block `src` (original layout) <-> its place in the packed block `p`. kPack: original
// -> packed (a null src writes a zero block: d = 0, every code 0); else packed -> original.
// Fixed sizes per format, so every copy is a plain load and store.
template <GgmlType T, bool kPack>
inline void PackedMove(const uint8_t* src, int i, uint8_t* p, uint8_t* dst) {
  constexpr int kFields = T == GgmlType::kQ4_1 ? 2 : 1;          // fp16 d (and m)
  constexpr int kChunks = T == GgmlType::kQ8_0 ? 8 : 4;          // 4-byte pieces per row and block
  constexpr uint8_t kFlip = T == GgmlType::kQ8_0 ? 0x80 : 0x00;  // Q8_0: code + 128
  uint8_t* pq = p + 2 * kPackRows * kFields;
  if constexpr (kPack) {
    uint8_t blk[2 * kFields + 4 * kChunks] = {};
    if (src != nullptr) std::memcpy(blk, src, sizeof(blk));
    for (int f = 0; f < kFields; ++f) std::memcpy(p + 2 * (f * kPackRows + i), blk + 2 * f, 2);
    for (int c = 0; c < kChunks; ++c) {
      uint32_t v;
      std::memcpy(&v, blk + 2 * kFields + 4 * c, 4);
      v ^= kFlip * 0x01010101u;
      std::memcpy(pq + 32 * c + 4 * i, &v, 4);
    }
  } else {
    for (int f = 0; f < kFields; ++f) std::memcpy(dst + 2 * f, p + 2 * (f * kPackRows + i), 2);
    for (int c = 0; c < kChunks; ++c) {
      uint32_t v;
      std::memcpy(&v, pq + 32 * c + 4 * i, 4);
      v ^= kFlip * 0x01010101u;
      std::memcpy(dst + 2 * kFields + 4 * c, &v, 4);
    }
  }
}

template <GgmlType T>
void PackRowsOf(const uint8_t* s, int64_t src_row_bytes, int64_t n_rows, int64_t nb, uint8_t* d) {
  const int64_t block_bytes = PackedBlockBytes(T);
  const int64_t src_block = static_cast<int64_t>(GgmlRowBytes(T, 32));
  for (int64_t g = 0; g * kPackRows < n_rows; ++g) {
    uint8_t* group = d + g * nb * block_bytes;
    const uint8_t* rows[kPackRows];
    for (int i = 0; i < kPackRows; ++i) {
      const int64_t r = g * kPackRows + i;
      rows[i] = r < n_rows ? s + r * src_row_bytes : nullptr;
    }
    for (int64_t b = 0; b < nb; ++b) {
      for (int i = 0; i < kPackRows; ++i) {
        PackedMove<T, true>(rows[i] != nullptr ? rows[i] + b * src_block : nullptr, i,
                            group + b * block_bytes, nullptr);
      }
    }
  }
}

template <GgmlType T>
void UnpackRowOf(const uint8_t* w, int64_t r, int64_t nb, uint8_t* dst) {
  const int64_t block_bytes = PackedBlockBytes(T);
  const int64_t dst_block = static_cast<int64_t>(GgmlRowBytes(T, 32));
  const uint8_t* group = w + r / kPackRows * nb * block_bytes;
  for (int64_t b = 0; b < nb; ++b) {
    PackedMove<T, false>(nullptr, static_cast<int>(r % kPackRows),
                         const_cast<uint8_t*>(group + b * block_bytes), dst + b * dst_block);
  }
}

}  // namespace

// The K-quants (Q4_K, Q5_K, Q6_K) have their layout in quants_packed_k.h.
bool HasPackedLayout(GgmlType t) { return PackedBlockBytes(t) != 0 || HasPackedKLayout(t); }

int64_t PackedGroupBytes(GgmlType t, int64_t n) {
  if (HasPackedKLayout(t)) return PackedKGroupBytes(t, n);
  return n / 32 * PackedBlockBytes(t);
}

int64_t PackedBytes(GgmlType t, int64_t rows, int64_t n) {
  return (rows + kPackRows - 1) / kPackRows * PackedGroupBytes(t, n);
}

void PackRows(GgmlType t, const void* src, int64_t src_row_bytes, int64_t n_rows, int64_t n,
              void* dst) {
  if (HasPackedKLayout(t)) return PackKRows(t, src, src_row_bytes, n_rows, n, dst);
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  switch (t) {
    case GgmlType::kQ4_0:
      return PackRowsOf<GgmlType::kQ4_0>(s, src_row_bytes, n_rows, n / 32, d);
    case GgmlType::kQ4_1:
      return PackRowsOf<GgmlType::kQ4_1>(s, src_row_bytes, n_rows, n / 32, d);
    case GgmlType::kQ8_0:
      return PackRowsOf<GgmlType::kQ8_0>(s, src_row_bytes, n_rows, n / 32, d);
    default:
      return;
  }
}

void UnpackRow(GgmlType t, const void* w, int64_t r, int64_t n, void* dst) {
  if (HasPackedKLayout(t)) return UnpackKRow(t, w, r, n, dst);
  const auto* p = static_cast<const uint8_t*>(w);
  auto* d = static_cast<uint8_t*>(dst);
  switch (t) {
    case GgmlType::kQ4_0:
      return UnpackRowOf<GgmlType::kQ4_0>(p, r, n / 32, d);
    case GgmlType::kQ4_1:
      return UnpackRowOf<GgmlType::kQ4_1>(p, r, n / 32, d);
    case GgmlType::kQ8_0:
      return UnpackRowOf<GgmlType::kQ8_0>(p, r, n / 32, d);
    default:
      return;
  }
}

const PackedQ8AKernels* PackedQ8AKernelsFor(KernelSet s) {
  switch (s) {
    case KernelSet::kScalar:
      return &ScalarPackedQ8AKernels();
    case KernelSet::kAvx2:
      return Avx2PackedQ8AKernels();
    case KernelSet::kAvxVnni:
      return AvxVnniPackedQ8AKernels();
    case KernelSet::kAvx512Vnni:
      return Avx512VnniPackedQ8AKernels();
#if defined(__aarch64__)
    case KernelSet::kNeon:
      return NeonPackedQ8AKernels();
#endif
    default:
      return nullptr;
  }
}

PackedDotFn PackedDot(const PackedQ8AKernels& k, GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_0:
      return k.q4_0;
    case GgmlType::kQ4_1:
      return k.q4_1;
    case GgmlType::kQ8_0:
      return k.q8_0;
    default:
      return nullptr;
  }
}

}  // namespace pinfer::quants
