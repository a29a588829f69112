// The packed layout of quants_packed.h: sizes, PackRows / UnpackRow, and the kernel tables.
#include "loaders/quants_packed.h"

#include <cstring>

#include "loaders/quants.h"

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
// -> packed; else packed -> original. A null src (pack) writes a zero row.
template <bool kPack>
void PackedMove(GgmlType t, const uint8_t* src, int i, uint8_t* p, uint8_t* dst) {
  if (t == GgmlType::kQ4_0 || t == GgmlType::kQ4_1) {
    const int fields = t == GgmlType::kQ4_0 ? 1 : 2;  // d (and m), fp16 each
    auto* px = reinterpret_cast<uint16_t*>(p);        // d[8] then m[8]
    uint8_t* pq = p + 2 * kPackRows * fields;
    if constexpr (kPack) {
      uint16_t h[2] = {0, 0};
      uint8_t qs[16] = {};
      if (src != nullptr) {
        std::memcpy(h, src, 2 * fields);
        std::memcpy(qs, src + 2 * fields, 16);
      }
      for (int f = 0; f < fields; ++f) std::memcpy(px + f * kPackRows + i, &h[f], 2);
      for (int c = 0; c < 4; ++c) std::memcpy(pq + 32 * c + 4 * i, qs + 4 * c, 4);
    } else {
      for (int f = 0; f < fields; ++f) std::memcpy(dst + 2 * f, px + f * kPackRows + i, 2);
      for (int c = 0; c < 4; ++c) std::memcpy(dst + 2 * fields + 4 * c, pq + 32 * c + 4 * i, 4);
    }
  } else {  // Q8_0
    auto* pd = reinterpret_cast<uint16_t*>(p);
    uint8_t* pq = p + 2 * kPackRows;
    if constexpr (kPack) {
      uint16_t h = 0;
      uint8_t qs[32] = {};
      if (src != nullptr) {
        std::memcpy(&h, src, 2);
        std::memcpy(qs, src + 2, 32);
        for (uint8_t& q : qs) q ^= 0x80;  // code + 128
      } else {
        std::memset(qs, 0x80, 32);  // code 0 (a zero block: d = 0, every code 0)
      }
      std::memcpy(pd + i, &h, 2);
      for (int c = 0; c < 8; ++c) std::memcpy(pq + 32 * c + 4 * i, qs + 4 * c, 4);
    } else {
      std::memcpy(dst, pd + i, 2);
      for (int c = 0; c < 8; ++c) {
        for (int k = 0; k < 4; ++k) dst[2 + 4 * c + k] = pq[32 * c + 4 * i + k] ^ 0x80;
      }
    }
  }
}

}  // namespace

bool HasPackedLayout(GgmlType t) { return PackedBlockBytes(t) != 0; }

int64_t PackedGroupBytes(GgmlType t, int64_t n) { return n / 32 * PackedBlockBytes(t); }

int64_t PackedBytes(GgmlType t, int64_t rows, int64_t n) {
  return (rows + kPackRows - 1) / kPackRows * PackedGroupBytes(t, n);
}

void PackRows(GgmlType t, const void* src, int64_t src_row_bytes, int64_t n_rows, int64_t n,
              void* dst) {
  const int64_t nb = n / 32, block_bytes = PackedBlockBytes(t);
  const int64_t src_block = static_cast<int64_t>(GgmlRowBytes(t, 32));
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t g = 0; g * kPackRows < n_rows; ++g) {
    uint8_t* group = d + g * nb * block_bytes;
    for (int i = 0; i < kPackRows; ++i) {
      const int64_t r = g * kPackRows + i;
      const uint8_t* row = r < n_rows ? s + r * src_row_bytes : nullptr;
      for (int64_t b = 0; b < nb; ++b) {
        PackedMove<true>(t, row != nullptr ? row + b * src_block : nullptr, i,
                         group + b * block_bytes, nullptr);
      }
    }
  }
}

void UnpackRow(GgmlType t, const void* w, int64_t r, int64_t n, void* dst) {
  const int64_t nb = n / 32, block_bytes = PackedBlockBytes(t);
  const int64_t dst_block = static_cast<int64_t>(GgmlRowBytes(t, 32));
  const auto* group = static_cast<const uint8_t*>(w) + r / kPackRows * nb * block_bytes;
  for (int64_t b = 0; b < nb; ++b) {
    PackedMove<false>(t, nullptr, static_cast<int>(r % kPackRows),
                      const_cast<uint8_t*>(group + b * block_bytes),
                      static_cast<uint8_t*>(dst) + b * dst_block);
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
