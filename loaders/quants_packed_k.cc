// quants_packed_k.h's layout (packing, unpacking) and the kernel table of each set. Baseline
// code: the kernels live in quants_packed_k_{scalar,avx2,avxvnni,avx512vnni,neon}.cc.
#include "loaders/quants_packed_k.h"

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace pinfer::quants {
namespace {

// Calls f(packed_offset, file_offset, bytes) for every field of row r (r < 8) of one packed
// super-block: the offsets in the packed block and in the row's file block.
template <typename Packed, typename FileBlock, typename F>
void ForEachField(int r, F&& f) {
  if constexpr (std::is_same_v<Packed, PackedQ6_K>) {
    f(offsetof(Packed, d) + 2 * r, offsetof(FileBlock, d), 2);
    for (int j = 0; j < 16; ++j)
      f(offsetof(Packed, scales) + 8 * j + r, offsetof(FileBlock, scales) + j, 1);
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 8; ++k) {
        f(offsetof(Packed, qh) + 4 * ((8 * h + k) * 8 + r),
          offsetof(FileBlock, qh) + 32 * h + 4 * k, 4);
        for (int c = 0; c < 2; ++c) {
          f(offsetof(Packed, ql) + 4 * (((2 * h + c) * 8 + k) * 8 + r),
            offsetof(FileBlock, ql) + 64 * h + 32 * c + 4 * k, 4);
        }
      }
    }
  } else {  // Q4_K, Q5_K
    f(offsetof(Packed, d) + 2 * r, offsetof(FileBlock, d), 2);
    f(offsetof(Packed, dmin) + 2 * r, offsetof(FileBlock, dmin), 2);
    for (int w = 0; w < 3; ++w)
      f(offsetof(Packed, scales) + 4 * (8 * w + r), offsetof(FileBlock, scales) + 4 * w, 4);
    if constexpr (std::is_same_v<Packed, PackedQ5_K>) {
      for (int k = 0; k < 8; ++k)
        f(offsetof(Packed, qh) + 4 * (8 * k + r), offsetof(FileBlock, qh) + 4 * k, 4);
    }
    for (int c = 0; c < 4; ++c) {
      for (int k = 0; k < 8; ++k) {
        f(offsetof(Packed, qs) + 4 * ((8 * c + k) * 8 + r),
          offsetof(FileBlock, qs) + 32 * c + 4 * k, 4);
      }
    }
  }
}

template <typename FileBlock, typename Packed>
void PkPack(const void* src, int64_t src_row_bytes, int64_t n_rows, int64_t n, void* dst) {
  const int64_t nb = n / kQK_K;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t g = 0; g * kPackKRows < n_rows; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* pb = d + (g * nb + i) * static_cast<int64_t>(sizeof(Packed));
      std::memset(pb, 0, sizeof(Packed));  // missing rows of a last group: zero
      for (int r = 0; r < kPackKRows && g * kPackKRows + r < n_rows; ++r) {
        const uint8_t* fb =
            s + (g * kPackKRows + r) * src_row_bytes + i * static_cast<int64_t>(sizeof(FileBlock));
        ForEachField<Packed, FileBlock>(
            r, [&](size_t po, size_t fo, size_t len) { std::memcpy(pb + po, fb + fo, len); });
      }
    }
  }
}

// Row r (any r < 8 * groups) of the packed matrix -> dst (its nb file blocks).
template <typename FileBlock, typename Packed>
void PkUnpackRow(const void* packed, int64_t r, int64_t n, void* dst) {
  const int64_t nb = n / kQK_K;
  const auto* s = static_cast<const uint8_t*>(packed);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* pb = s + (r / kPackKRows * nb + i) * static_cast<int64_t>(sizeof(Packed));
    uint8_t* fb = d + i * static_cast<int64_t>(sizeof(FileBlock));
    ForEachField<Packed, FileBlock>(
        static_cast<int>(r % kPackKRows),
        [&](size_t po, size_t fo, size_t len) { std::memcpy(fb + fo, pb + po, len); });
  }
}

}  // namespace

bool HasPackedKLayout(GgmlType t) {
  return t == GgmlType::kQ4_K || t == GgmlType::kQ5_K || t == GgmlType::kQ6_K;
}

int64_t PackedKGroupBytes(GgmlType t, int64_t n) {
  switch (t) {
    case GgmlType::kQ4_K:
      return n / kQK_K * static_cast<int64_t>(sizeof(PackedQ4_K));
    case GgmlType::kQ5_K:
      return n / kQK_K * static_cast<int64_t>(sizeof(PackedQ5_K));
    case GgmlType::kQ6_K:
      return n / kQK_K * static_cast<int64_t>(sizeof(PackedQ6_K));
    default:
      return 0;
  }
}

int64_t PackedKBytes(GgmlType t, int64_t n_rows, int64_t n) {
  return (n_rows + kPackKRows - 1) / kPackKRows * PackedKGroupBytes(t, n);
}

void PackKRows(GgmlType t, const void* src, int64_t src_row_bytes, int64_t n_rows, int64_t n,
               void* dst) {
  switch (t) {
    case GgmlType::kQ4_K:
      return PkPack<BlockQ4_K, PackedQ4_K>(src, src_row_bytes, n_rows, n, dst);
    case GgmlType::kQ5_K:
      return PkPack<BlockQ5_K, PackedQ5_K>(src, src_row_bytes, n_rows, n, dst);
    case GgmlType::kQ6_K:
      return PkPack<BlockQ6_K, PackedQ6_K>(src, src_row_bytes, n_rows, n, dst);
    default:
      return;
  }
}

void UnpackKRows(GgmlType t, const void* packed, int64_t n_rows, int64_t n, void* dst,
                 int64_t dst_row_bytes) {
  switch (t) {
    case GgmlType::kQ4_K:
      for (int64_t r = 0; r < n_rows; ++r) {
        PkUnpackRow<BlockQ4_K, PackedQ4_K>(packed, r, n,
                                           static_cast<uint8_t*>(dst) + r * dst_row_bytes);
      }
      return;
    case GgmlType::kQ5_K:
      for (int64_t r = 0; r < n_rows; ++r) {
        PkUnpackRow<BlockQ5_K, PackedQ5_K>(packed, r, n,
                                           static_cast<uint8_t*>(dst) + r * dst_row_bytes);
      }
      return;
    case GgmlType::kQ6_K:
      for (int64_t r = 0; r < n_rows; ++r) {
        PkUnpackRow<BlockQ6_K, PackedQ6_K>(packed, r, n,
                                           static_cast<uint8_t*>(dst) + r * dst_row_bytes);
      }
      return;
    default:
      return;
  }
}

void UnpackKRow(GgmlType t, const void* packed, int64_t r, int64_t n, void* dst) {
  switch (t) {
    case GgmlType::kQ4_K:
      return PkUnpackRow<BlockQ4_K, PackedQ4_K>(packed, r, n, dst);
    case GgmlType::kQ5_K:
      return PkUnpackRow<BlockQ5_K, PackedQ5_K>(packed, r, n, dst);
    case GgmlType::kQ6_K:
      return PkUnpackRow<BlockQ6_K, PackedQ6_K>(packed, r, n, dst);
    default:
      return;
  }
}

const PackedKQuantKernels* PackedKQuantKernelsFor(KernelSet s) {
  switch (s) {
    case KernelSet::kScalar:
      return &ScalarPackedKQuantKernels();
    case KernelSet::kAvx2:
      return Avx2PackedKQuantKernels();
    case KernelSet::kAvxVnni:
      return AvxVnniPackedKQuantKernels();
    case KernelSet::kAvx512Vnni:
      return Avx512VnniPackedKQuantKernels();
#if defined(__aarch64__)
    case KernelSet::kNeon:
      return NeonPackedKQuantKernels();
#endif
    default:
      return nullptr;
  }
}

PackedDotFn PackedKDot(const PackedKQuantKernels& k, GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_K:
      return k.q4_k;
    case GgmlType::kQ5_K:
      return k.q5_k;
    case GgmlType::kQ6_K:
      return k.q6_k;
    default:
      return nullptr;
  }
}

}  // namespace pinfer::quants
