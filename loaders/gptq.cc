#include "loaders/gptq.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "loaders/absl_compat.h"
#include "loaders/fp16.h"

namespace pinfer {
namespace {

// AWQ stores output 8c + kAwqOrder[j] in nibble j; kAwqNibble is the inverse (output -> nibble).
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

std::string ShapeText(const std::vector<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

int Nibble(const StTensor& t, int64_t word, int j) {
  return static_cast<int>((static_cast<uint32_t>(StReadI32(t, word)) >> (4 * j)) & 0xF);
}

// Packed q value of input i, output o.
int QAt(const PackedLinear& l, int64_t o, int64_t i) {
  if (l.method == QuantMethod::kGptq) return Nibble(l.qweight, (i / 8) * l.out_features + o, i % 8);
  return Nibble(l.qweight, i * (l.out_features / 8) + o / 8, kAwqNibble[o % 8]);
}

int ZeroAt(const PackedLinear& l, int64_t g, int64_t o) {
  const int64_t word = g * (l.out_features / 8) + o / 8;
  const int j = l.method == QuantMethod::kGptq ? static_cast<int>(o % 8) : kAwqNibble[o % 8];
  return Nibble(l.qzeros, word, j) + l.zero_offset;
}

// Group of each input column.
std::vector<int64_t> Groups(const PackedLinear& l) {
  std::vector<int64_t> g(static_cast<size_t>(l.in_features));
  for (int64_t i = 0; i < l.in_features; ++i) {
    g[i] = l.g_idx ? StReadI32(*l.g_idx, i) : i / l.group_size;
  }
  return g;
}

}  // namespace

absl::StatusOr<PackedLinear> MakePackedLinear(const QuantConfig& cfg, std::string_view name,
                                              const StTensor& qweight, const StTensor& qzeros,
                                              const StTensor& scales, const StTensor* g_idx) {
  const std::string who = absl::StrCat(Sv(QuantMethodName(cfg.method)), " layer '", Sv(name), "'");
  auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": ", Sv(what)));
  };
  if (cfg.bits != 4) {
    return absl::UnimplementedError(
        absl::StrCat(who, ": bits = ", cfg.bits, " is not supported; only 4-bit is"));
  }
  for (const StTensor* t : {&qweight, &qzeros}) {
    if (t->dtype != StDtype::kI32 || t->shape.size() != 2) {
      return bad(absl::StrCat(t->name, " is ", Sv(StDtypeName(t->dtype)), " ", ShapeText(t->shape),
                              "; expected a 2-D I32 tensor"));
    }
  }
  if ((scales.dtype != StDtype::kF16 && scales.dtype != StDtype::kBF16 &&
       scales.dtype != StDtype::kF32) ||
      scales.shape.size() != 2) {
    return bad(absl::StrCat(scales.name, " is ", Sv(StDtypeName(scales.dtype)), " ",
                            ShapeText(scales.shape), "; expected 2-D F16 scales"));
  }
  PackedLinear l;
  l.name = std::string(name);
  l.method = cfg.method;
  l.zero_offset = cfg.zero_offset;
  const bool gptq = cfg.method == QuantMethod::kGptq;
  l.in_features = gptq ? qweight.shape[0] * 8 : qweight.shape[0];
  l.out_features = gptq ? qweight.shape[1] : qweight.shape[1] * 8;
  if (l.in_features <= 0 || l.out_features <= 0) {
    return bad(absl::StrCat("qweight shape ", ShapeText(qweight.shape), " is empty"));
  }
  l.group_size = cfg.group_size == -1 ? l.in_features : cfg.group_size;
  l.n_groups = (l.in_features + l.group_size - 1) / l.group_size;
  const std::vector<int64_t> want_zeros = {l.n_groups, l.out_features / 8};
  const std::vector<int64_t> want_scales = {l.n_groups, l.out_features};
  if (l.out_features % 8 != 0 || qzeros.shape != want_zeros) {
    return bad(absl::StrCat(qzeros.name, " has shape ", ShapeText(qzeros.shape), "; expected ",
                            ShapeText(want_zeros), " for qweight ", ShapeText(qweight.shape),
                            " with group_size ", cfg.group_size, " at 4 bits"));
  }
  if (scales.shape != want_scales) {
    return bad(absl::StrCat(scales.name, " has shape ", ShapeText(scales.shape), "; expected ",
                            ShapeText(want_scales), " for qweight ", ShapeText(qweight.shape),
                            " with group_size ", cfg.group_size));
  }
  if (g_idx != nullptr) {
    if (!gptq) return bad("AWQ layers have no g_idx");
    if (g_idx->dtype != StDtype::kI32 || g_idx->shape != std::vector<int64_t>{l.in_features}) {
      return bad(absl::StrCat(g_idx->name, " is ", Sv(StDtypeName(g_idx->dtype)), " ",
                              ShapeText(g_idx->shape), "; expected I32 [", l.in_features, "]"));
    }
    for (int64_t i = 0; i < l.in_features; ++i) {
      const int32_t g = StReadI32(*g_idx, i);
      if (g < 0 || g >= l.n_groups) {
        return bad(
            absl::StrCat(g_idx->name, "[", i, "] = ", g, " is outside [0, ", l.n_groups, ")"));
      }
    }
    l.g_idx = *g_idx;
  }
  l.qweight = qweight;
  l.qzeros = qzeros;
  l.scales = scales;
  return l;
}

absl::StatusOr<PackedLinear> FindPackedLinear(const SafetensorsModel& model, const QuantConfig& cfg,
                                              std::string_view prefix) {
  const StTensor* t[3];
  const char* suffixes[3] = {".qweight", ".qzeros", ".scales"};
  for (int k = 0; k < 3; ++k) {
    t[k] = model.Find(absl::StrCat(Sv(prefix), suffixes[k]));
    if (t[k] == nullptr) {
      return absl::NotFoundError(absl::StrCat("tensor '", Sv(prefix), suffixes[k],
                                              "' not found in ", model.folder(), "; is this a ",
                                              Sv(QuantMethodName(cfg.method)), " checkpoint?"));
    }
  }
  const StTensor* g_idx =
      cfg.method == QuantMethod::kGptq ? model.Find(absl::StrCat(Sv(prefix), ".g_idx")) : nullptr;
  return MakePackedLinear(cfg, prefix, *t[0], *t[1], *t[2], g_idx);
}

std::vector<float> DequantizePacked(const PackedLinear& l) {
  const std::vector<int64_t> groups = Groups(l);
  std::vector<float> w(static_cast<size_t>(l.out_features * l.in_features));
  for (int64_t o = 0; o < l.out_features; ++o) {
    for (int64_t i = 0; i < l.in_features; ++i) {
      const int64_t g = groups[i];
      const float s = StReadFloat(l.scales, g * l.out_features + o);
      w[o * l.in_features + i] = s * static_cast<float>(QAt(l, o, i) - ZeroAt(l, g, o));
    }
  }
  return w;
}

absl::StatusOr<Q4_1Weights> RepackToQ4_1(const PackedLinear& l) {
  const std::string who = absl::StrCat("repacking '", l.name, "' to Q4_1");
  if (l.group_size % kQK4_1 != 0 || l.in_features % kQK4_1 != 0) {
    return absl::UnimplementedError(
        absl::StrCat(who, ": group size ", l.group_size, " and input width ", l.in_features,
                     " must be multiples of 32 (Q4_1 blocks hold 32 columns of one group)"));
  }
  const std::vector<int64_t> groups = Groups(l);
  Q4_1Weights r;
  r.rows = l.out_features;
  r.cols = l.in_features;
  std::vector<int32_t> perm(static_cast<size_t>(l.in_features));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int32_t a, int32_t b) { return groups[a] < groups[b]; });
  const int64_t nb = l.in_features / kQK4_1;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t g = groups[perm[b * kQK4_1]];
    for (int k = 1; k < kQK4_1; ++k) {
      if (groups[perm[b * kQK4_1 + k]] != g) {
        return absl::UnimplementedError(absl::StrCat(
            who, ": after sorting columns by g_idx, block ", b, " (columns ", b * kQK4_1, "..",
            b * kQK4_1 + 31, ") mixes groups ", g, " and ", groups[perm[b * kQK4_1 + k]],
            "; each group must have a multiple of 32 columns"));
      }
    }
  }
  r.blocks.resize(static_cast<size_t>(r.rows * nb));
  for (int64_t o = 0; o < l.out_features; ++o) {
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ4_1& blk = r.blocks[o * nb + b];
      const int64_t g = groups[perm[b * kQK4_1]];
      const float s = StReadFloat(l.scales, g * l.out_features + o);
      const int z = ZeroAt(l, g, o);
      const float m = -static_cast<float>(z) * s;
      blk.d = Fp32ToFp16(s);
      blk.m = Fp32ToFp16(m);
      if (!std::isfinite(Fp16ToFp32(blk.d)) || !std::isfinite(Fp16ToFp32(blk.m))) {
        return absl::OutOfRangeError(absl::StrCat(who, ": output ", o, " group ", g, " scale ", s,
                                                  " x zero ", z, " does not fit in fp16"));
      }
      for (int j = 0; j < kQK4_1 / 2; ++j) {
        const int lo = QAt(l, o, perm[b * kQK4_1 + j]);
        const int hi = QAt(l, o, perm[b * kQK4_1 + j + kQK4_1 / 2]);
        blk.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
  bool identity = true;
  for (int64_t k = 0; k < l.in_features; ++k) identity = identity && perm[k] == k;
  if (!identity) r.perm = std::move(perm);
  return r;
}

}  // namespace pinfer
