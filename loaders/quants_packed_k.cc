// quants_packed_k.h's layout (packing, unpacking) and the kernel table of each set. Baseline
// code: the kernels live in quants_packed_k_{scalar,avx2,avxvnni,avx512vnni}.cc.
#include "loaders/quants_packed_k.h"

#include <cstring>

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace pinfer::quants {
namespace {

// Moves between the 8 file blocks of one super-block (b[r], r < 8) and one packed block;
// kPack: file -> packed, else packed -> file. Every field is a copy of 1, 2 or 4 bytes.
template <bool kPack>
void PkMove(void* a, void* b, size_t bytes) {
  if constexpr (kPack) {
    std::memcpy(a, b, bytes);
  } else {
    std::memcpy(b, a, bytes);
  }
}

template <bool kPack>
void PkBlock(BlockQ4_K* b, PackedQ4_K* p) {
  for (int r = 0; r < kPackKRows; ++r) {
    PkMove<kPack>(&p->d[r], &b[r].d, 2);
    PkMove<kPack>(&p->dmin[r], &b[r].dmin, 2);
    for (int w = 0; w < 3; ++w) PkMove<kPack>(p->scales[w][r], b[r].scales + 4 * w, 4);
    for (int c = 0; c < 4; ++c) {
      for (int k = 0; k < 8; ++k) PkMove<kPack>(p->qs[c][k][r], b[r].qs + 32 * c + 4 * k, 4);
    }
  }
}

template <bool kPack>
void PkBlock(BlockQ5_K* b, PackedQ5_K* p) {
  for (int r = 0; r < kPackKRows; ++r) {
    PkMove<kPack>(&p->d[r], &b[r].d, 2);
    PkMove<kPack>(&p->dmin[r], &b[r].dmin, 2);
    for (int w = 0; w < 3; ++w) PkMove<kPack>(p->scales[w][r], b[r].scales + 4 * w, 4);
    for (int k = 0; k < 8; ++k) PkMove<kPack>(p->qh[k][r], b[r].qh + 4 * k, 4);
    for (int c = 0; c < 4; ++c) {
      for (int k = 0; k < 8; ++k) PkMove<kPack>(p->qs[c][k][r], b[r].qs + 32 * c + 4 * k, 4);
    }
  }
}

template <bool kPack>
void PkBlock(BlockQ6_K* b, PackedQ6_K* p) {
  for (int r = 0; r < kPackKRows; ++r) {
    PkMove<kPack>(&p->d[r], &b[r].d, 2);
    for (int j = 0; j < 16; ++j) PkMove<kPack>(&p->scales[j][r], &b[r].scales[j], 1);
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 8; ++k) {
        PkMove<kPack>(p->qh[h][k][r], b[r].qh + 32 * h + 4 * k, 4);
        for (int c = 0; c < 2; ++c) {
          PkMove<kPack>(p->ql[h][c][k][r], b[r].ql + 64 * h + 32 * c + 4 * k, 4);
        }
      }
    }
  }
}

template <typename FileBlock, typename Packed>
void PkPack(const void* src, int64_t src_row_bytes, int64_t n_rows, int64_t n, void* dst) {
  const int64_t nb = n / kQK_K;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<Packed*>(dst);
  for (int64_t g = 0; g * kPackKRows < n_rows; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      FileBlock blocks[kPackKRows];
      std::memset(blocks, 0, sizeof(blocks));
      for (int r = 0; r < kPackKRows && g * kPackKRows + r < n_rows; ++r) {
        std::memcpy(&blocks[r], s + (g * kPackKRows + r) * src_row_bytes + i * sizeof(FileBlock),
                    sizeof(FileBlock));
      }
      Packed p;
      PkBlock<true>(blocks, &p);
      std::memcpy(d + g * nb + i, &p, sizeof(p));
    }
  }
}

template <typename FileBlock, typename Packed>
void PkUnpack(const void* packed, int64_t n_rows, int64_t n, void* dst, int64_t dst_row_bytes) {
  const int64_t nb = n / kQK_K;
  const auto* s = static_cast<const Packed*>(packed);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t g = 0; g * kPackKRows < n_rows; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      Packed p;
      std::memcpy(&p, s + g * nb + i, sizeof(p));
      FileBlock blocks[kPackKRows];
      PkBlock<false>(blocks, &p);
      for (int r = 0; r < kPackKRows && g * kPackKRows + r < n_rows; ++r) {
        std::memcpy(d + (g * kPackKRows + r) * dst_row_bytes + i * sizeof(FileBlock), &blocks[r],
                    sizeof(FileBlock));
      }
    }
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
      return PkUnpack<BlockQ4_K, PackedQ4_K>(packed, n_rows, n, dst, dst_row_bytes);
    case GgmlType::kQ5_K:
      return PkUnpack<BlockQ5_K, PackedQ5_K>(packed, n_rows, n, dst, dst_row_bytes);
    case GgmlType::kQ6_K:
      return PkUnpack<BlockQ6_K, PackedQ6_K>(packed, n_rows, n, dst, dst_row_bytes);
    default:
      return;
  }
}

bool CpuRunsAvx512VnniPackedK() {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
  if (!CpuRunsAvx2Fma16c()) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

const PackedKQuantKernels* PackedKQuantKernelsFor(KernelSet s) {
  switch (s) {
    case KernelSet::kAvx2:
      return Avx2PackedKQuantKernels();
    case KernelSet::kAvxVnni:
      return AvxVnniPackedKQuantKernels();
    default:
      return nullptr;
  }
}

}  // namespace pinfer::quants
