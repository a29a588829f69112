// Kernel execution for the emulator: the blocks of a grid run one after another; within a
// block every thread is a fiber on the calling OS thread, switched only at barriers and warp
// shuffles, so those are exact and a barrier that some threads never reach is detected.
#include <sys/mman.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/cuda_emu/emu_kernel.h"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

#if defined(__x86_64__)
// Saves the callee-saved registers and the stack pointer in *save_sp, then resumes the fiber
// whose stack pointer is load_sp (System V x86-64: rbx, rbp, r12-r15 are callee-saved).
extern "C" void pinfer_emu_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl pinfer_emu_switch
  .type pinfer_emu_switch, @function
pinfer_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size pinfer_emu_switch, .-pinfer_emu_switch
)");
#endif

namespace emu {
namespace {

constexpr int kMaxThreads = 1024;
constexpr size_t kStackBytes = 256 << 10;
constexpr size_t kGuardBytes = 4096;

struct Fiber {
  uint3 idx;
  bool done = false;
  const uint64_t* wait_gen = nullptr;  // waiting until *wait_gen != wait_value
  uint64_t wait_value = 0;
  Scope wait_scope = Scope::kBlock;
  uint8_t* stack = nullptr;  // the usable stack's lowest address (a guard page below)
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t ctx;
#endif
};

struct Block {
  int threads = 0;
  int block_arrived = 0;
  uint64_t block_gen = 0;
  int warp_arrived[kMaxThreads / 32] = {};
  uint64_t warp_gen[kMaxThreads / 32] = {};
  uint64_t slots[kMaxThreads / 32][2][32] = {};  // two sets per warp, used in turn
};

std::vector<Fiber> fibers;
Block block;
int current = -1;  // the running fiber, -1: the scheduler
const std::function<void()>* body = nullptr;
const char* kernel_name = "";
bool reported = false;  // one fault message per launch
#if defined(__x86_64__)
void* scheduler_sp = nullptr;
#else
ucontext_t scheduler_ctx;
#endif

// The running kernel and block, and the thread (when one is running).
std::string Where() {
  std::string w = absl::StrCat("kernel ", kernel_name, ", block (", blockIdx.x, ",", blockIdx.y,
                               ",", blockIdx.z, ")");
  if (current >= 0) {
    absl::StrAppend(&w, ", thread (", threadIdx.x, ",", threadIdx.y, ",", threadIdx.z, ")");
  }
  return w;
}

void FaultHere(cudaError_t err, const std::string& what) {
  if (reported) return;
  reported = true;
  Fault(err, absl::StrCat(what, " in ", Where()).c_str());
}

void ToScheduler() {
  Fiber& f = fibers[static_cast<size_t>(current)];
#if defined(__x86_64__)
  pinfer_emu_switch(&f.sp, scheduler_sp);
#else
  swapcontext(&f.ctx, &scheduler_ctx);
#endif
}

[[noreturn]] void FiberMain() {
  (*body)();
  fibers[static_cast<size_t>(current)].done = true;
  ToScheduler();
  __builtin_unreachable();  // a finished fiber is never resumed
}

void EnsureFibers(int n) {
  if (static_cast<int>(fibers.size()) >= n) return;
  fibers.resize(kMaxThreads);
  const size_t slice = kGuardBytes + kStackBytes;
  void* mem = mmap(nullptr, slice * kMaxThreads, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) {
    std::fprintf(stderr, "cuda emulator: cannot map fiber stacks\n");
    std::abort();  // the test harness itself cannot run
  }
  for (int i = 0; i < kMaxThreads; ++i) {
    uint8_t* base = static_cast<uint8_t*>(mem) + slice * static_cast<size_t>(i);
    mprotect(base, kGuardBytes, PROT_NONE);  // a stack overflow faults instead of corrupting
    fibers[static_cast<size_t>(i)].stack = base + kGuardBytes;
  }
}

void StartFiber(Fiber& f) {
  f.done = false;
  f.wait_gen = nullptr;
#if defined(__x86_64__)
  uint64_t* top = reinterpret_cast<uint64_t*>(f.stack + kStackBytes);
  top[-1] = 0;                                       // FiberMain's return address: it never returns
  top[-2] = reinterpret_cast<uint64_t>(&FiberMain);  // where the first switch "returns" to
  for (int r = 3; r <= 8; ++r) top[-r] = 0;          // rbp, rbx, r12-r15
  f.sp = &top[-8];
#else
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack;
  f.ctx.uc_stack.ss_size = kStackBytes;
  f.ctx.uc_link = nullptr;
  makecontext(&f.ctx, reinterpret_cast<void (*)()>(&FiberMain), 0);
#endif
}

void Resume(int i) {
  current = i;
  Fiber& f = fibers[static_cast<size_t>(i)];
  threadIdx = f.idx;
#if defined(__x86_64__)
  pinfer_emu_switch(&scheduler_sp, f.sp);
#else
  swapcontext(&scheduler_ctx, &f.ctx);
#endif
  current = -1;
}

// Runs the current block's threads to completion; false (after a fault) when some wait at a
// barrier or shuffle that the others never reach.
bool RunBlock() {
  const int n = block.threads;
  static std::vector<int> live;  // threads not finished, in order
  live.clear();
  for (int i = 0; i < n; ++i) {
    StartFiber(fibers[static_cast<size_t>(i)]);
    live.push_back(i);
  }
  while (!live.empty()) {
    bool progressed = false;
    size_t kept = 0;
    for (const int i : live) {
      Fiber& f = fibers[static_cast<size_t>(i)];
      if (f.wait_gen == nullptr || *f.wait_gen != f.wait_value) {
        f.wait_gen = nullptr;
        Resume(i);
        progressed = true;
      }
      if (!f.done) live[kept++] = i;
    }
    live.resize(kept);
    if (!progressed) break;
  }
  if (live.empty()) return true;
  int at_block = 0, at_warp = 0, exited = 0;
  for (int i = 0; i < n; ++i) {
    const Fiber& f = fibers[static_cast<size_t>(i)];
    if (f.done) {
      ++exited;
    } else {
      ++(f.wait_scope == Scope::kBlock ? at_block : at_warp);
    }
  }
  FaultHere(cudaErrorLaunchFailure,
            absl::StrCat("divergent barrier: ", at_block, " threads wait at __syncthreads, ",
                         at_warp, " at a warp shuffle or __syncwarp, ", exited,
                         " have returned; on a GPU this hangs or corrupts data"));
  return false;
}

int ThreadsOf(const dim3& d) { return static_cast<int>(d.x * d.y * d.z); }

}  // namespace

int LaneId() { return current % 32; }

void Barrier(Scope scope) {
  if (current < 0) {
    Fault(cudaErrorLaunchFailure, "a barrier outside a kernel");
    return;
  }
  Fiber& f = fibers[static_cast<size_t>(current)];
  int* arrived;
  uint64_t* gen;
  int target;
  if (scope == Scope::kBlock) {
    arrived = &block.block_arrived, gen = &block.block_gen, target = block.threads;
  } else {
    const int w = current / 32;
    arrived = &block.warp_arrived[w], gen = &block.warp_gen[w];
    target = std::min(32, block.threads - 32 * w);
  }
  if (++*arrived == target) {  // the last one releases the others and goes on
    *arrived = 0;
    ++*gen;
    return;
  }
  f.wait_gen = gen;
  f.wait_value = *gen;
  f.wait_scope = scope;
  ToScheduler();
}

uint64_t WarpExchange(uint64_t value, int src_lane, unsigned mask, const char* what) {
  const int w = current / 32;
  if (mask != 0xffffffffu || block.threads - 32 * w < 32) {
    FaultHere(cudaErrorLaunchFailure,
              absl::StrCat(what, " with mask ", mask, " in a warp of ",
                           std::min(32, block.threads - 32 * w),
                           " threads: the emulator takes full-warp shuffles only"));
    return value;
  }
  // Two slot sets used in turn: the one barrier per shuffle keeps a lane from writing a set
  // again (two shuffles later) before every lane has read it.
  // The set is the warp barrier's generation parity, the same for every lane of one shuffle.
  uint64_t(&slots)[32] = block.slots[w][block.warp_gen[w] & 1];
  slots[current % 32] = value;
  Barrier(Scope::kWarp);
  return slots[src_lane & 31];
}

void CheckAligned(const void* p, size_t align, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % align != 0) {
    FaultHere(cudaErrorMisalignedAddress,
              absl::StrCat(what, " of ", align, " bytes at misaligned address ",
                           absl::Hex(reinterpret_cast<uintptr_t>(p))));
  }
}

cudaError_t RunGrid(const char* name, const LaunchConfig& c, std::function<void()> fn) {
  const int threads = ThreadsOf(c.block);
  if (threads < 1 || threads > kMaxThreads || c.block.x > 1024 || c.block.y > 1024 ||
      c.block.z > 64 || c.grid.x < 1 || c.grid.x > 0x7fffffffu || c.grid.y < 1 ||
      c.grid.y > 65535 || c.grid.z < 1 || c.grid.z > 65535) {
    std::fprintf(stderr,
                 "cuda emulator: launch of %s with grid (%u,%u,%u), block (%u,%u,%u) is "
                 "outside CUDA's limits\n",
                 name, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z);
    return cudaErrorInvalidConfiguration;
  }
  return Submit(c.stream, name, [name, c, fn = std::move(fn)]() {
    EnsureFibers(ThreadsOf(c.block));
    body = &fn;
    kernel_name = name;
    reported = false;
    blockDim = c.block;
    gridDim = c.grid;
    block.threads = ThreadsOf(c.block);
    for (int i = 0; i < block.threads; ++i) {
      fibers[static_cast<size_t>(i)].idx = uint3{
          static_cast<unsigned>(i) % c.block.x, static_cast<unsigned>(i) / c.block.x % c.block.y,
          static_cast<unsigned>(i) / (c.block.x * c.block.y)};
    }
    for (unsigned z = 0; z < c.grid.z && !reported; ++z) {
      for (unsigned y = 0; y < c.grid.y && !reported; ++y) {
        for (unsigned x = 0; x < c.grid.x && !reported; ++x) {
          blockIdx = uint3{x, y, z};
          block.block_arrived = 0;
          std::fill(std::begin(block.warp_arrived), std::end(block.warp_arrived), 0);
          if (!RunBlock()) return;
        }
      }
    }
  });
}

}  // namespace emu
