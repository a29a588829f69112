// Kernels that read weights in their storage type: embedding lookup, the decode GEMV
// (dequantize and multiply, a warp per weight row) and the dequantization of row tiles to
// half/bfloat16 for cuBLAS.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "cuda/dequant.cuh"
#include "cuda/gemv_groups.cuh"
#include "cuda/gemv_units.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/pdl.cuh"

namespace pinfer::cuda {
namespace {

constexpr int kGemvWarps = 4;
constexpr int kThreads = 256;

unsigned Blocks(int64_t n, int per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// ---- the decode GEMV: y[t][r] = sum_c W[r][c] x[t][c], t < n <= kMaxGemvTokens ----
// A warp per weight row; the lanes' work is in gemv_units.cuh. One launch may cover up to
// three matrices over the same x (Q, K, V: blocks [end[i-1], end[i]) take matrix i), or
// compute silu(gate x) * (up x) (a warp takes row r of both), or add into y (residuals).

enum GemvOp : int { kGemvStore = 0, kGemvAccumulate = 1, kGemvSwiGlu = 2 };
constexpr int kMaxGemvParts = 3;

struct GemvJob {
  DeviceMatrix w[kMaxGemvParts];
  float* y[kMaxGemvParts];
  int64_t ldy[kMaxGemvParts];
  unsigned end[kMaxGemvParts];  // cumulative thread blocks per part
  int parts = 1;
  int op = kGemvStore;
  bool prefetch = false;  // launched as a programmatic dependent: pull the rows into L2 first
};

template <typename T>
__device__ __forceinline__ const T& Pick(const T (&v)[kMaxGemvParts], int i) {
  return i == 0 ? v[0] : i == 1 ? v[1] : v[2];  // constant offsets only: params stay params
}

// The warp's sums (a second set for SwiGLU's up rows) -> y[t * ldy + r].
template <int kMaxT>
__device__ __forceinline__ void StoreSums(float (&acc)[kMaxT], float (&acc2)[kMaxT], int n,
                                          int lane, int64_t r, int op, float* __restrict__ y,
                                          int64_t ldy) {
#pragma unroll
  for (int t = 0; t < kMaxT; ++t) {
    if (t < n) {
      float s = WarpSum(acc[t]);
      if (op == kGemvSwiGlu) s = s / (1.0f + expf(-s)) * WarpSum(acc2[t]);
      if (lane == 0) {
        float* out = y + t * ldy + r;
        *out = op == kGemvAccumulate ? *out + s : s;
      }
    }
  }
}

// Which part this thread block computes, its first block, and the warp's row.
__device__ __forceinline__ int PartOf(const GemvJob& job, unsigned* first) {
  int part = 0;
  while (part + 1 < job.parts && blockIdx.x >= Pick(job.end, part)) ++part;
  *first = part == 0 ? 0u : Pick(job.end, part - 1);
  return part;
}

// kGroups: gemv::GroupLane<kType> (gemv_groups.cuh); else for legacy types
// gemv::LegacyLane<kType, kUnitBlocks, kWords>, for K types gemv::KLane<kType>.
template <int kType, int kUnitBlocks, bool kWords, int kMaxT, bool kGroups = false>
__global__ void __launch_bounds__(32 * kGemvWarps)
    GemvVectorKernel(GemvJob job, const float* __restrict__ x, int n) {
  constexpr bool kLegacy = gemv::LegacyBlockBytes(kType) > 0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned first = 0;
  const int part = PartOf(job, &first);
  const DeviceMatrix& w = Pick(job.w, part);
  const int64_t r = static_cast<int64_t>(blockIdx.x - first) * kGemvWarps + warp;
  AllowDependentLaunch();
  if (r >= w.rows) return;  // the whole warp: r is the same for its lanes
  const int64_t at = r * static_cast<int64_t>(w.row_bytes);
  if (job.prefetch) {  // weights only: nothing before the wait may read x or write y
    for (int64_t o = 128 * lane; o < static_cast<int64_t>(w.row_bytes); o += 128 * 32) {
      PrefetchL2(w.data + at + o);
      if (job.op == kGemvSwiGlu) PrefetchL2(job.w[1].data + at + o);
    }
  }
  WaitForPrerequisites();
  float acc[kMaxT], acc2[kMaxT];
#pragma unroll
  for (int t = 0; t < kMaxT; ++t) acc[t] = acc2[t] = 0.0f;
  if constexpr (kGroups) {
    gemv::GroupLane<kType>(w.data + at, x, w.cols, n, lane, 32, acc);
    if (job.op == kGemvSwiGlu)
      gemv::GroupLane<kType>(job.w[1].data + at, x, w.cols, n, lane, 32, acc2);
  } else if constexpr (kLegacy) {
    gemv::LegacyLane<kType, kUnitBlocks, kWords>(w.data + at, x, w.cols, n, lane, 32, acc);
    if (job.op == kGemvSwiGlu) {
      gemv::LegacyLane<kType, kUnitBlocks, kWords>(job.w[1].data + at, x, w.cols, n, lane, 32,
                                                   acc2);
    }
  } else {
    gemv::KLane<kType>(w.data + at, x, w.cols, n, lane, 32, acc);
    if (job.op == kGemvSwiGlu) gemv::KLane<kType>(job.w[1].data + at, x, w.cols, n, lane, 32, acc2);
  }
  StoreSums(acc, acc2, n, lane, r, job.op, Pick(job.y, part), Pick(job.ldy, part));
}

// Float types (and any block layout the kernels above do not take): a lane per value (float
// types) or per group of 8 values (Dequant8), for up to kMaxGemvTokens tokens.
template <int kType>
__global__ void __launch_bounds__(32 * kGemvWarps)
    GemvKernel(DeviceMatrix w, const float* __restrict__ x, int n, float* __restrict__ y,
               int64_t ldy, bool accumulate) {
  AllowDependentLaunch();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (r >= w.rows) return;
  const uint8_t* row = w.data + r * static_cast<int64_t>(w.row_bytes);
  const int64_t cols = w.cols;
  float acc[kMaxGemvTokens];
#pragma unroll
  for (int t = 0; t < kMaxGemvTokens; ++t) acc[t] = 0.0f;
  if constexpr (kType == kWF32 || kType == kWF16 || kType == kWBF16) {
    for (int64_t c = lane; c < cols; c += 32) {
      const float wv = LoadFloatType(kType, row, c);
#pragma unroll
      for (int t = 0; t < kMaxGemvTokens; ++t) {
        if (t < n) acc[t] += wv * __ldg(x + t * cols + c);
      }
    }
  } else {
    const int64_t groups = cols / 8;
    for (int64_t g = lane; g < groups; g += 32) {
      float v[8];
      Dequant8(kType, row, g, v);
      gemv::Fma8(acc, v, x, cols, n, g * 8);
    }
  }
  StoreSums(acc, acc, n, lane, r, accumulate ? kGemvAccumulate : kGemvStore, y, ldy);
}

template <typename Out>
__device__ __forceinline__ Out Convert(float v);
template <>
__device__ __forceinline__ float Convert<float>(float v) {
  return v;
}
// Saturating: an activation beyond half's range (a prefill outlier) becomes +-65504, not an
// infinity that turns the whole GEMM row into NaN; NaN stays NaN.
template <>
__device__ __forceinline__ __half Convert<__half>(float v) {
  return __float2half_rn(fabsf(v) > 65504.0f ? copysignf(65504.0f, v) : v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 Convert<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// out[i][c] = dequant(row src_row(i))[c]: one thread per group of 8 values (block types) or
// per value (float types). tokens == nullptr: src_row(i) = row0 + i.
template <typename Out>
__global__ void DequantRowsKernel(DeviceMatrix w, const int32_t* tokens, int64_t row0,
                                  int64_t n_rows, Out* __restrict__ out) {
  AllowDependentLaunch();
  const bool flt = IsFloatType(w.type);
  const int64_t per_row = flt ? w.cols : w.cols / 8;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= per_row * n_rows) return;
  const int64_t i = idx / per_row, g = idx % per_row;
  const int64_t src = tokens ? tokens[i] : row0 + i;
  const uint8_t* row = w.data + src * static_cast<int64_t>(w.row_bytes);
  Out* o = out + i * w.cols;
  if (flt) {
    o[g] = Convert<Out>(LoadFloatType(w.type, row, g));
    return;
  }
  float v[8];
  Dequant8(w.type, row, g, v);
  // The 8 outputs in 16-byte stores (o + g * 8 is 16-byte aligned: cols % 8 == 0 and out
  // is a device allocation).
  union {
    Out o[8];
    uint4 u[sizeof(Out) * 8 / 16];
  } pack;
#pragma unroll
  for (int k = 0; k < 8; ++k) pack.o[k] = Convert<Out>(v[k]);
  uint4* dst = reinterpret_cast<uint4*>(o + g * 8);
#pragma unroll
  for (int k = 0; k < static_cast<int>(sizeof(Out) * 8 / 16); ++k) dst[k] = pack.u[k];
}

__global__ void GatherColumnsKernel(const float* __restrict__ x, const int32_t* __restrict__ perm,
                                    int64_t total, int64_t cols, float* __restrict__ out) {
  AllowDependentLaunch();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t t = i / cols, k = i % cols;
  out[i] = x[t * cols + perm[k]];
}

template <typename Out>
__global__ void ToHalfKernel(const float* __restrict__ x, int64_t n, Out* __restrict__ out) {
  AllowDependentLaunch();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = Convert<Out>(x[i]);
}

int64_t ThreadsPerRow(const DeviceMatrix& w) {
  const bool flt = w.type == kWF32 || w.type == kWF16 || w.type == kWBF16;
  return flt ? w.cols : w.cols / 8;
}

}  // namespace

namespace {
// A switch set by its setter, or on first use by an environment variable: on (1) when the
// variable equals `on_value`, else off (0).
class EnvSwitch {
 public:
  EnvSwitch(const char* var, const char* on_value) : var_(var), on_value_(on_value) {}
  void Set(bool on) { state_ = on ? 1 : 0; }
  bool On() {
    int s = state_.load();
    if (s < 0) {
      const char* env = std::getenv(var_);
      s = env != nullptr && std::strcmp(env, on_value_) == 0 ? 1 : 0;
      state_ = s;
    }
    return s == 1;
  }

 private:
  const char* var_;
  const char* on_value_;
  std::atomic<int> state_{-1};  // -1: not chosen yet
};

EnvSwitch units_layout("PINFER_CUDA_GEMV", "units");
EnvSwitch programmatic("PINFER_CUDA_PDL", "1");
}  // namespace

void SetProgrammaticLaunch(bool on) { programmatic.Set(on); }
bool ProgrammaticLaunch() { return programmatic.On(); }

void SetGemvLayout(GemvLayout layout) { units_layout.Set(layout == GemvLayout::kUnits); }
GemvLayout CurrentGemvLayout() {
  return units_layout.On() ? GemvLayout::kUnits : GemvLayout::kGroups;
}

bool WeightTypeSupported(int type) {
  switch (type) {
    case kWF32:
    case kWF16:
    case kWBF16:
    case kWQ4_0:
    case kWQ4_1:
    case kWQ5_0:
    case kWQ5_1:
    case kWQ8_0:
    case kWQ4_K:
    case kWQ5_K:
    case kWQ6_K:
      return true;
    default:
      return false;
  }
}

cudaError_t LaunchEmbedding(const DeviceMatrix& emb, const int32_t* tokens, int n, float* x,
                            cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  const int64_t total = ThreadsPerRow(emb) * n;
  PINFER_LAUNCH(DequantRowsKernel<float>, Blocks(total, kThreads), kThreads, 0, s)
  (emb, tokens, 0, n, x);
  return cudaGetLastError();
}

namespace {

// An ordinary launch of kernel(args) on s, or with ProgrammaticLaunch() as a programmatic
// dependent of the kernel before it (its error, if any, is cudaGetLastError's either way).
template <typename... P, typename... A>
void LaunchDependent(void (*kernel)(P...), dim3 grid, dim3 block, cudaStream_t s, A... args) {
  if (!ProgrammaticLaunch()) {
    PINFER_LAUNCH(kernel, grid, block, 0, s)(args...);
    return;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  (void)cudaLaunchKernelEx(&config, kernel, args...);
}

// Launches the vectorised kernel for `job` (blocks thread blocks) at a token count of at most
// kMaxT; false, launching nothing, when its matrices do not share one block type, column
// count and a layout that kernel reads (the caller then falls back).
template <int kMaxT>
bool LaunchJob(const GemvJob& job_in, unsigned blocks, const float* x, int n, cudaStream_t s) {
  const DeviceMatrix& w0 = job_in.w[0];
  // 4-byte loads: every row starts 4-byte aligned; then 18/22/34-byte blocks are read in pairs
  // (a row holds an even number of them: row_bytes % 4 == 0 says so). 16-byte loads likewise.
  bool words = true, vec16 = true;
  const int used = job_in.op == kGemvSwiGlu ? 2 : job_in.parts;
  for (int i = 0; i < used; ++i) {
    const DeviceMatrix& m = job_in.w[i];
    const uintptr_t base = reinterpret_cast<uintptr_t>(m.data);
    if (m.type != w0.type || m.cols != w0.cols || base % 2 != 0 || m.row_bytes % 2 != 0) {
      return false;
    }
    words = words && base % 4 == 0 && m.row_bytes % 4 == 0;
    vec16 = vec16 && base % 16 == 0 && m.row_bytes % 16 == 0;
  }
  const dim3 grid(blocks), block(32 * kGemvWarps);
  GemvJob job = job_in;
  job.prefetch = ProgrammaticLaunch();
  if (CurrentGemvLayout() == GemvLayout::kGroups) {
    switch (w0.type) {
#define PINFER_GROUPS(T)                                                                     \
  case T:                                                                                    \
    LaunchDependent(&GemvVectorKernel<T, 1, false, kMaxT, true>, grid, block, s, job, x, n); \
    return true;
      PINFER_GROUPS(kWQ4_0)
      PINFER_GROUPS(kWQ4_1)
      PINFER_GROUPS(kWQ5_0)
      PINFER_GROUPS(kWQ5_1)
      PINFER_GROUPS(kWQ8_0)
      PINFER_GROUPS(kWQ4_K)
      PINFER_GROUPS(kWQ5_K)
      PINFER_GROUPS(kWQ6_K)
#undef PINFER_GROUPS
      default:
        return false;
    }
  }
  switch (w0.type) {
#define PINFER_LEGACY(T)                                                                   \
  case T:                                                                                  \
    if constexpr (gemv::LegacyBlockBytes(T) % 4 == 0) {                                    \
      if (words) {                                                                         \
        LaunchDependent(&GemvVectorKernel<T, 1, true, kMaxT>, grid, block, s, job, x, n);  \
      } else {                                                                             \
        LaunchDependent(&GemvVectorKernel<T, 1, false, kMaxT>, grid, block, s, job, x, n); \
      }                                                                                    \
    } else {                                                                               \
      if (words) {                                                                         \
        LaunchDependent(&GemvVectorKernel<T, 2, true, kMaxT>, grid, block, s, job, x, n);  \
      } else {                                                                             \
        LaunchDependent(&GemvVectorKernel<T, 1, false, kMaxT>, grid, block, s, job, x, n); \
      }                                                                                    \
    }                                                                                      \
    return true;
    PINFER_LEGACY(kWQ4_0)
    PINFER_LEGACY(kWQ4_1)
    PINFER_LEGACY(kWQ5_0)
    PINFER_LEGACY(kWQ5_1)
    PINFER_LEGACY(kWQ8_0)
#undef PINFER_LEGACY
    case kWQ4_K:
      if (!vec16) return false;
      LaunchDependent(&GemvVectorKernel<kWQ4_K, 1, false, kMaxT>, grid, block, s, job, x, n);
      return true;
    case kWQ5_K:
      if (!vec16) return false;
      LaunchDependent(&GemvVectorKernel<kWQ5_K, 1, false, kMaxT>, grid, block, s, job, x, n);
      return true;
    case kWQ6_K:
      LaunchDependent(&GemvVectorKernel<kWQ6_K, 1, false, kMaxT>, grid, block, s, job, x, n);
      return true;
    default:
      return false;
  }
}

bool LaunchJobAnyN(const GemvJob& job, unsigned blocks, const float* x, int n, cudaStream_t s) {
  // Sums for kMaxT tokens live in registers: size them to the step (a token's sums are the
  // same whatever kMaxT, so a padded graph step matches the eager one).
  return n == 1   ? LaunchJob<1>(job, blocks, x, n, s)
         : n <= 4 ? LaunchJob<4>(job, blocks, x, n, s)
         : n <= 8 ? LaunchJob<8>(job, blocks, x, n, s)
                  : LaunchJob<kMaxGemvTokens>(job, blocks, x, n, s);
}

cudaError_t CheckGemvArgs(const float* x, int n) {
  if (n > kMaxGemvTokens) return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) return cudaErrorMisalignedAddress;
  return cudaSuccess;
}

}  // namespace

cudaError_t LaunchGemv(const DeviceMatrix& w, const float* x, int n, float* y, int64_t ldy,
                       cudaStream_t s, bool accumulate) {
  if (n <= 0 || w.rows == 0) return cudaSuccess;
  if (const cudaError_t e = CheckGemvArgs(x, n); e != cudaSuccess) return e;
  GemvJob job;
  job.w[0] = w;
  job.y[0] = y;
  job.ldy[0] = ldy;
  job.end[0] = Blocks(w.rows, kGemvWarps);
  job.op = accumulate ? kGemvAccumulate : kGemvStore;
  if (LaunchJobAnyN(job, job.end[0], x, n, s)) return cudaGetLastError();
  const dim3 grid(Blocks(w.rows, kGemvWarps)), block(32 * kGemvWarps);
  switch (w.type) {
#define PINFER_GEMV_CASE(T)                                                       \
  case T:                                                                         \
    PINFER_LAUNCH(GemvKernel<T>, grid, block, 0, s)(w, x, n, y, ldy, accumulate); \
    break;
    PINFER_GEMV_CASE(kWF32)
    PINFER_GEMV_CASE(kWF16)
    PINFER_GEMV_CASE(kWBF16)
    PINFER_GEMV_CASE(kWQ4_0)
    PINFER_GEMV_CASE(kWQ4_1)
    PINFER_GEMV_CASE(kWQ5_0)
    PINFER_GEMV_CASE(kWQ5_1)
    PINFER_GEMV_CASE(kWQ8_0)
    PINFER_GEMV_CASE(kWQ4_K)
    PINFER_GEMV_CASE(kWQ5_K)
    PINFER_GEMV_CASE(kWQ6_K)
#undef PINFER_GEMV_CASE
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchGemvMulti(const DeviceMatrix* const* ws, float* const* ys, int count,
                            const float* x, int n, cudaStream_t s) {
  if (count < 1 || count > kMaxGemvParts) return cudaErrorInvalidValue;
  if (n <= 0) return cudaSuccess;
  if (const cudaError_t e = CheckGemvArgs(x, n); e != cudaSuccess) return e;
  GemvJob job;
  job.parts = count;
  unsigned blocks = 0;
  for (int i = 0; i < count; ++i) {
    if (ws[i]->rows <= 0) return cudaErrorNotSupported;
    job.w[i] = *ws[i];
    job.y[i] = ys[i];
    job.ldy[i] = ws[i]->rows;
    blocks += Blocks(ws[i]->rows, kGemvWarps);
    job.end[i] = blocks;
  }
  if (!LaunchJobAnyN(job, blocks, x, n, s)) return cudaErrorNotSupported;
  return cudaGetLastError();
}

cudaError_t LaunchGemvSwiGlu(const DeviceMatrix& gate, const DeviceMatrix& up, const float* x,
                             int n, float* y, cudaStream_t s) {
  if (n <= 0 || gate.rows == 0) return cudaSuccess;
  if (const cudaError_t e = CheckGemvArgs(x, n); e != cudaSuccess) return e;
  if (up.rows != gate.rows) return cudaErrorNotSupported;
  GemvJob job;
  job.w[0] = gate;
  job.w[1] = up;
  job.y[0] = y;
  job.ldy[0] = gate.rows;
  job.end[0] = Blocks(gate.rows, kGemvWarps);
  job.op = kGemvSwiGlu;
  if (!LaunchJobAnyN(job, job.end[0], x, n, s)) return cudaErrorNotSupported;
  return cudaGetLastError();
}

cudaError_t LaunchDequantRows(const DeviceMatrix& w, int64_t row0, int64_t n_rows, void* out,
                              bool bf16, cudaStream_t s) {
  if (n_rows <= 0) return cudaSuccess;
  const int64_t total = ThreadsPerRow(w) * n_rows;
  if (bf16) {
    PINFER_LAUNCH(DequantRowsKernel<__nv_bfloat16>, Blocks(total, kThreads), kThreads, 0, s)
    (w, nullptr, row0, n_rows, static_cast<__nv_bfloat16*>(out));
  } else {
    PINFER_LAUNCH(DequantRowsKernel<__half>, Blocks(total, kThreads), kThreads, 0, s)
    (w, nullptr, row0, n_rows, static_cast<__half*>(out));
  }
  return cudaGetLastError();
}

cudaError_t LaunchGatherColumns(const float* x, const int32_t* perm, int n, int64_t cols,
                                float* out, cudaStream_t s) {
  const int64_t total = static_cast<int64_t>(n) * cols;
  if (total <= 0) return cudaSuccess;
  PINFER_LAUNCH(GatherColumnsKernel, Blocks(total, kThreads), kThreads, 0, s)
  (x, perm, total, cols, out);
  return cudaGetLastError();
}

cudaError_t LaunchToHalf(const float* x, int64_t n, void* out, bool bf16, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  if (bf16) {
    PINFER_LAUNCH(ToHalfKernel, Blocks(n, kThreads), kThreads, 0, s)
    (x, n, static_cast<__nv_bfloat16*>(out));
  } else {
    PINFER_LAUNCH(ToHalfKernel, Blocks(n, kThreads), kThreads, 0, s)
    (x, n, static_cast<__half*>(out));
  }
  return cudaGetLastError();
}

}  // namespace pinfer::cuda
