// The emulator's runtime: device memory, streams (every operation runs when issued, in
// order), stream capture and graphs, errors. See emu_runtime.h for what it checks.
#include "tests/cuda_emu/emu_runtime.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Op {
  std::string what;
  void (*run)(void*);
  void* state;
  void (*destroy)(void*);
};

struct Ops {
  std::vector<std::shared_ptr<Op>> list;
};

struct Allocation {
  size_t bytes = 0;
  void* map = nullptr;  // device: the mapping (with its guard page); host: nullptr
  size_t map_bytes = 0;
};

uint64_t Capacity() {
  const char* env = std::getenv("PINFER_CUDA_EMU_MIB");
  const long mib = env ? std::atol(env) : 0;
  return (mib > 0 ? static_cast<uint64_t>(mib) : 4096ull) << 20;
}

struct State {
  std::map<uintptr_t, Allocation> device, pinned;
  size_t device_bytes = 0;
  cudaError_t last = cudaSuccess;
  cudaError_t sticky = cudaSuccess;
  int capturing = 0;  // streams being captured (by this, the only, thread)
  emu::Counters counters;
};
State& S() {
  static State s;
  return s;
}

}  // namespace

struct EmuStream {
  bool capturing = false;
  bool invalidated = false;
  std::string invalid_reason;
  Ops captured;
};
struct EmuGraph {
  Ops ops;
};
struct EmuGraphExec {
  Ops ops;
};

namespace {

void Invalidate(cudaStream_t s, const std::string& why) {
  if (!s->invalidated) {
    std::fprintf(stderr, "cuda emulator: stream capture invalidated: %s\n", why.c_str());
  }
  s->invalidated = true;
  s->invalid_reason = why;
}

std::vector<cudaStream_t>& Capturing() {
  static std::vector<cudaStream_t> v;
  return v;
}

// A call CUDA forbids while this thread captures (ThreadLocal/Global modes): it fails and
// invalidates every capture in progress.
cudaError_t Unsafe(const char* call) {
  if (Capturing().empty()) return cudaSuccess;
  for (cudaStream_t s : Capturing()) {
    Invalidate(s, std::string(call) + " during capture (not allowed while this thread captures)");
  }
  return cudaErrorStreamCaptureUnsupported;
}

// The sticky fault if there is one, else `err`.
cudaError_t Ret(cudaError_t err) { return S().sticky != cudaSuccess ? S().sticky : err; }

const Allocation* Find(const std::map<uintptr_t, Allocation>& m, const void* p, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(a);
  if (it == m.begin()) return nullptr;
  --it;
  if (a + bytes > it->first + it->second.bytes || a < it->first) return nullptr;
  return &it->second;
}

void Run(Op& op) {
  if (S().sticky != cudaSuccess) return;  // a faulted context runs nothing more
  ++S().counters.ops_run;
  op.run(op.state);
}

}  // namespace

namespace emu {

Counters counters() {
  Counters c = S().counters;
  c.device_bytes = S().device_bytes;
  return c;
}

void ResetForTest() {
  S().sticky = cudaSuccess;
  S().last = cudaSuccess;
}

void SetLastError(cudaError_t err) {
  if (err != cudaSuccess) S().last = err;
}

void Fault(cudaError_t err, const char* message) {
  std::fprintf(stderr, "cuda emulator: kernel fault (%s): %s\n", cudaGetErrorName(err), message);
  ++S().counters.faults;
  if (S().sticky == cudaSuccess) S().sticky = err;
}

bool IsDeviceRange(const void* p, size_t bytes) { return Find(S().device, p, bytes) != nullptr; }

cudaError_t Submit(cudaStream_t s, const char* what, void (*run)(void*), void* state,
                   void (*destroy)(void*)) {
  auto op = std::shared_ptr<Op>(new Op{what, run, state, destroy}, [](Op* o) {
    o->destroy(o->state);
    delete o;
  });
  if (S().sticky != cudaSuccess) return S().sticky;
  if (s == nullptr) {
    if (!Capturing().empty()) {
      for (cudaStream_t c : Capturing()) {
        Invalidate(c, std::string(what) + " on the legacy default stream during capture");
      }
      return cudaErrorStreamCaptureImplicit;
    }
  } else if (s->capturing) {
    if (s->invalidated) return cudaErrorStreamCaptureInvalidated;
    s->captured.list.push_back(op);
    ++S().counters.captured_ops;
    return cudaSuccess;
  }
  Run(*op);
  return Ret(cudaSuccess);
}

}  // namespace emu

const char* cudaGetErrorName(cudaError_t err) {
  switch (err) {
#define PINFER_EMU_NAME(e) \
  case e:                  \
    return #e;
    PINFER_EMU_NAME(cudaSuccess)
    PINFER_EMU_NAME(cudaErrorInvalidValue)
    PINFER_EMU_NAME(cudaErrorMemoryAllocation)
    PINFER_EMU_NAME(cudaErrorInitializationError)
    PINFER_EMU_NAME(cudaErrorInvalidConfiguration)
    PINFER_EMU_NAME(cudaErrorInvalidDevicePointer)
    PINFER_EMU_NAME(cudaErrorInvalidMemcpyDirection)
    PINFER_EMU_NAME(cudaErrorInsufficientDriver)
    PINFER_EMU_NAME(cudaErrorNoDevice)
    PINFER_EMU_NAME(cudaErrorInvalidDevice)
    PINFER_EMU_NAME(cudaErrorNoKernelImageForDevice)
    PINFER_EMU_NAME(cudaErrorInvalidDeviceFunction)
    PINFER_EMU_NAME(cudaErrorInvalidResourceHandle)
    PINFER_EMU_NAME(cudaErrorIllegalState)
    PINFER_EMU_NAME(cudaErrorIllegalAddress)
    PINFER_EMU_NAME(cudaErrorMisalignedAddress)
    PINFER_EMU_NAME(cudaErrorLaunchFailure)
    PINFER_EMU_NAME(cudaErrorNotSupported)
    PINFER_EMU_NAME(cudaErrorStreamCaptureUnsupported)
    PINFER_EMU_NAME(cudaErrorStreamCaptureInvalidated)
    PINFER_EMU_NAME(cudaErrorStreamCaptureUnjoined)
    PINFER_EMU_NAME(cudaErrorStreamCaptureImplicit)
    PINFER_EMU_NAME(cudaErrorUnknown)
#undef PINFER_EMU_NAME
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t err) {
  switch (err) {
    case cudaSuccess:
      return "no error";
    case cudaErrorMemoryAllocation:
      return "out of memory (emulated capacity, PINFER_CUDA_EMU_MIB)";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorMisalignedAddress:
      return "misaligned address";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    default:
      return cudaGetErrorName(err);
  }
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = S().sticky != cudaSuccess ? S().sticky : S().last;
  S().last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return S().sticky != cudaSuccess ? S().sticky : S().last; }

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? Ret(cudaSuccess) : cudaErrorInvalidDevice;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "pagedinfer CUDA emulator on the host, no GPU");
  prop->totalGlobalMem = Capacity();
  prop->multiProcessorCount = 1;
  prop->major = 9;
  prop->minor = 0;
  prop->sharedMemPerBlock = 48 << 10;
  prop->maxThreadsPerBlock = 1024;
  prop->warpSize = 32;
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  *total = Capacity();
  *free = *total - S().device_bytes;
  return Ret(cudaSuccess);
}
cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t e = Unsafe("cudaDeviceSynchronize"); e != cudaSuccess) return e;
  return Ret(cudaSuccess);
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = nullptr;
  if (cudaError_t e = Unsafe("cudaMalloc"); e != cudaSuccess) return e;
  if (S().sticky != cudaSuccess) return S().sticky;
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  if (S().device_bytes + rounded > Capacity()) return cudaErrorMemoryAllocation;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t body = (rounded + page - 1) / page * page;
  void* map = mmap(nullptr, body + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return cudaErrorMemoryAllocation;
  uint8_t* guard = static_cast<uint8_t*>(map) + body;
  mprotect(guard, page, PROT_NONE);   // reads or writes past the end fault
  uint8_t* start = guard - rounded;   // 256-byte aligned, as cudaMalloc's are
  std::memset(start, 0xFF, rounded);  // poison: unwritten floats read as NaN
  S().device[reinterpret_cast<uintptr_t>(start)] = Allocation{bytes, map, body + page};
  S().device_bytes += rounded;
  *p = start;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (cudaError_t e = Unsafe("cudaFree"); e != cudaSuccess) return e;
  if (p == nullptr) return Ret(cudaSuccess);
  auto it = S().device.find(reinterpret_cast<uintptr_t>(p));
  if (it == S().device.end()) return cudaErrorInvalidValue;
  S().device_bytes -= (std::max<size_t>(it->second.bytes, 1) + 255) / 256 * 256;
  munmap(it->second.map, it->second.map_bytes);
  S().device.erase(it);
  return Ret(cudaSuccess);
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = nullptr;
  if (cudaError_t e = Unsafe("cudaMallocHost"); e != cudaSuccess) return e;
  void* m = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (m == nullptr) return cudaErrorMemoryAllocation;
  S().pinned[reinterpret_cast<uintptr_t>(m)] = Allocation{bytes, nullptr, 0};
  *p = m;
  return Ret(cudaSuccess);
}

cudaError_t cudaFreeHost(void* p) {
  if (cudaError_t e = Unsafe("cudaFreeHost"); e != cudaSuccess) return e;
  if (p == nullptr) return Ret(cudaSuccess);
  auto it = S().pinned.find(reinterpret_cast<uintptr_t>(p));
  if (it == S().pinned.end()) return cudaErrorInvalidValue;
  std::free(p);
  S().pinned.erase(it);
  return Ret(cudaSuccess);
}

namespace {

// Whether a copy's pointers are where its kind says (a wrong kind is a bug on a GPU too).
cudaError_t CheckCopy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  const bool dd = emu::IsDeviceRange(dst, bytes), sd = emu::IsDeviceRange(src, bytes);
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToDevice:
      ok = dd && !sd;
      break;
    case cudaMemcpyDeviceToHost:
      ok = sd && !dd;
      break;
    case cudaMemcpyDeviceToDevice:
      ok = dd && sd;
      break;
    case cudaMemcpyHostToHost:
      ok = !dd && !sd;
      break;
    case cudaMemcpyDefault:
      break;
  }
  if (!ok) {
    std::fprintf(stderr,
                 "cuda emulator: copy of %zu bytes (kind %d) from %p (%s) to %p (%s): a pointer "
                 "is not where the kind says, or the range passes an allocation's end\n",
                 bytes, static_cast<int>(kind), src, sd ? "device" : "not device", dst,
                 dd ? "device" : "not device");
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

bool IsPinned(const void* p, size_t bytes) { return Find(S().pinned, p, bytes) != nullptr; }

}  // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t e = Unsafe("cudaMemcpy"); e != cudaSuccess) return e;
  if (S().sticky != cudaSuccess) return S().sticky;
  if (cudaError_t e = CheckCopy(dst, src, bytes, kind); e != cudaSuccess) return e;
  if (bytes) std::memcpy(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s) {
  if (S().sticky != cudaSuccess) return S().sticky;
  if (cudaError_t e = CheckCopy(dst, src, bytes, kind); e != cudaSuccess) return e;
  const bool host_side = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToHost;
  const void* host = kind == cudaMemcpyHostToDevice ? src : dst;
  if (s != nullptr && s->capturing && host_side && !IsPinned(host, bytes)) {
    Invalidate(s, "cudaMemcpyAsync with pageable host memory during capture");
    return cudaErrorStreamCaptureUnsupported;
  }
  return emu::Submit(s, "cudaMemcpyAsync", [dst, src, bytes]() {
    if (bytes) std::memcpy(dst, src, bytes);
  });
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  if (cudaError_t e = Unsafe("cudaMemset"); e != cudaSuccess) return e;
  if (S().sticky != cudaSuccess) return S().sticky;
  if (bytes && !emu::IsDeviceRange(p, bytes)) return cudaErrorInvalidValue;
  if (bytes) std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
  if (bytes && !emu::IsDeviceRange(p, bytes)) return cudaErrorInvalidValue;
  return emu::Submit(s, "cudaMemsetAsync", [p, value, bytes]() {
    if (bytes) std::memset(p, value, bytes);
  });
}

cudaError_t cudaStreamCreate(cudaStream_t* s) {
  *s = new EmuStream();
  return Ret(cudaSuccess);
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  if (s->capturing) return cudaErrorIllegalState;
  delete s;
  return Ret(cudaSuccess);
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (s != nullptr && s->capturing) {
    Invalidate(s, "cudaStreamSynchronize of the capturing stream");
    return cudaErrorStreamCaptureUnsupported;
  }
  if (cudaError_t e = Unsafe("cudaStreamSynchronize"); e != cudaSuccess) return e;
  return Ret(cudaSuccess);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  if (s == nullptr) return cudaErrorStreamCaptureUnsupported;  // the legacy stream
  if (s->capturing) return cudaErrorIllegalState;
  if (mode == cudaStreamCaptureModeRelaxed) return cudaErrorNotSupported;  // not emulated
  s->capturing = true;
  s->invalidated = false;
  s->captured.list.clear();
  Capturing().push_back(s);
  return Ret(cudaSuccess);
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  *graph = nullptr;
  if (s == nullptr || !s->capturing) return cudaErrorIllegalState;
  s->capturing = false;
  auto& c = Capturing();
  c.erase(std::find(c.begin(), c.end(), s));
  Ops ops = std::move(s->captured);
  s->captured.list.clear();
  if (s->invalidated) return cudaErrorStreamCaptureInvalidated;
  *graph = new EmuGraph{std::move(ops)};
  return Ret(cudaSuccess);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = nullptr;
  if (graph == nullptr) return cudaErrorInvalidValue;
  *exec = new EmuGraphExec{graph->ops};  // shares the recorded operations
  return Ret(cudaSuccess);
}

cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t) {
  return exec == nullptr ? cudaErrorInvalidValue : Ret(cudaSuccess);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  if (exec == nullptr) return cudaErrorInvalidValue;
  if (s != nullptr && s->capturing) return cudaErrorNotSupported;  // not emulated
  if (s == nullptr && !Capturing().empty()) return cudaErrorStreamCaptureImplicit;
  for (const std::shared_ptr<Op>& op : exec->ops.list) Run(*op);
  return Ret(cudaSuccess);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

struct EmuEvent {
  bool recorded = false;
  std::chrono::steady_clock::time_point at;
};

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new EmuEvent();
  return Ret(cudaSuccess);
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  return emu::Submit(s, "cudaEventRecord", [e]() {
    e->recorded = true;
    e->at = std::chrono::steady_clock::now();
  });
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (cudaError_t err = Unsafe("cudaEventSynchronize"); err != cudaSuccess) return err;
  return e == nullptr ? cudaErrorInvalidResourceHandle : Ret(cudaSuccess);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (start == nullptr || end == nullptr) return cudaErrorInvalidResourceHandle;
  if (!start->recorded || !end->recorded) return cudaErrorInvalidResourceHandle;
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return Ret(cudaSuccess);
}
