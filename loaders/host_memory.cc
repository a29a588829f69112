#include "loaders/host_memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loaders/absl_compat.h"
#include "loaders/byte_size.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace pinfer {
namespace {

constexpr size_t kHugePage = 2u << 20;

size_t PageSize() {
  const long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? static_cast<size_t>(p) : 4096;
}

// [p, p + n) widened to whole pages.
struct PageRange {
  uint8_t* begin = nullptr;
  size_t bytes = 0;
};
PageRange Pages(const void* p, size_t n) {
  const size_t page = PageSize();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
  return PageRange{reinterpret_cast<uint8_t*>(a), e - a};
}

// An anonymous mapping of `bytes` starting on an `align` boundary (for a huge page: extra
// address space asked for, then the unaligned head and the tail given back).
uint8_t* MapAligned(size_t bytes, size_t align) {
  const size_t extra = align > PageSize() ? align : 0;
  void* p =
      ::mmap(nullptr, bytes + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (extra == 0) return static_cast<uint8_t*>(p);
  const uintptr_t raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (raw + align - 1) / align * align;
  if (start > raw) ::munmap(p, start - raw);
  const size_t tail = raw + bytes + align - (start + bytes);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(start + bytes), tail);
  return reinterpret_cast<uint8_t*>(start);
}

// Writes every page (the kernel populates them where it can; a store per page otherwise).
absl::Status PopulateForWrite(uint8_t* p, size_t n, std::string_view what) {
  if (::madvise(p, n, MADV_POPULATE_WRITE) == 0) return absl::OkStatus();
  const int err = errno;
  if (err == ENOMEM || err == EFAULT || err == EHWPOISON) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot commit ", FormatBytes(n), " for ", Sv(what), ": ", std::strerror(err),
        " (the machine or its memory limit has no room for it); lower the memory asked for"));
  }
  const size_t page = PageSize();
  for (size_t off = 0; off < n; off += page) reinterpret_cast<volatile uint8_t*>(p)[off] = 0;
  return absl::OkStatus();
}

}  // namespace

bool TransparentHugePagesOffered() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(in, text);
  return text.find("[always]") != std::string::npos || text.find("[madvise]") != std::string::npos;
}

std::string MemlockLimitText() {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0) return "unknown";
  if (rl.rlim_cur == RLIM_INFINITY) return "unlimited";
  return FormatBytes(rl.rlim_cur);
}

absl::Status LockPages(const void* p, size_t n, std::string_view what) {
  if (n == 0) return absl::OkStatus();
  const PageRange r = Pages(p, n);
  if (::mlock(r.begin, r.bytes) == 0) return absl::OkStatus();
  const int err = errno;
  return absl::ResourceExhaustedError(absl::StrCat(
      "--mlock: cannot lock ", FormatBytes(r.bytes), " of ", Sv(what),
      " in memory: ", std::strerror(err), "; the memlock limit (RLIMIT_MEMLOCK, `ulimit -l`) is ",
      MemlockLimitText(),
      ". Raise it (`ulimit -l unlimited`, memlock in /etc/security/limits.conf, or docker run "
      "--ulimit memlock=-1) or start without --mlock"));
}

absl::Status PopulateForRead(const void* p, size_t n) {
  if (n == 0) return absl::OkStatus();
  const PageRange r = Pages(p, n);
  if (::madvise(r.begin, r.bytes, MADV_POPULATE_READ) == 0) return absl::OkStatus();
  const size_t page = PageSize();
  uint8_t sink = 0;
  for (size_t off = 0; off < r.bytes; off += page) {
    sink ^= reinterpret_cast<const volatile uint8_t*>(r.begin)[off];
  }
  (void)sink;
  return absl::OkStatus();
}

size_t ReleaseFilePages(const void* p, size_t n) {
  const size_t page = PageSize();
  const uintptr_t a = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (e <= a) return 0;
  if (::madvise(reinterpret_cast<void*>(a), e - a, MADV_DONTNEED) != 0) return 0;
  return e - a;
}

uint64_t ResidentPageBytes(const void* p, size_t n) {
  if (n == 0) return 0;
  const PageRange r = Pages(p, n);
  const size_t page = PageSize();
  std::vector<unsigned char> vec(r.bytes / page);
  if (::mincore(r.begin, r.bytes, vec.data()) != 0) return 0;
  const uint8_t* begin = static_cast<const uint8_t*>(p);
  const uint8_t* end = begin + n;
  uint64_t resident = 0;
  for (size_t i = 0; i < vec.size(); ++i) {
    if ((vec[i] & 1) == 0) continue;
    const uint8_t* a = std::max<const uint8_t*>(begin, r.begin + i * page);
    const uint8_t* b = std::min<const uint8_t*>(end, r.begin + (i + 1) * page);
    resident += static_cast<uint64_t>(b - a);
  }
  return resident;
}

absl::StatusOr<std::unique_ptr<CommittedMemory>> CommittedMemory::Allocate(size_t bytes,
                                                                           Options options,
                                                                           std::string_view what) {
  std::unique_ptr<CommittedMemory> m(new CommittedMemory());
  if (bytes == 0) return m;
  const auto start = std::chrono::steady_clock::now();
  const size_t page = PageSize();
  m->size_ = bytes;
  m->mapped_ = (bytes + page - 1) / page * page;
  const bool huge = options.huge_pages && TransparentHugePagesOffered();
  m->data_ = MapAligned(m->mapped_, huge ? kHugePage : page);
  if (m->data_ == nullptr) {
    const int err = errno;
    m->mapped_ = 0;
    return absl::ResourceExhaustedError(absl::StrCat("cannot map ", FormatBytes(bytes), " for ",
                                                     Sv(what), ": ", std::strerror(err)));
  }
  m->huge_pages_ = huge && ::madvise(m->data_, m->mapped_, MADV_HUGEPAGE) == 0;
  if (absl::Status s = PopulateForWrite(m->data_, m->mapped_, what); !s.ok()) return s;
  if (options.lock) {
    if (absl::Status s = LockPages(m->data_, m->mapped_, what); !s.ok()) return s;
    m->locked_ = true;
  }
  m->commit_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

CommittedMemory::~CommittedMemory() {
  if (data_ != nullptr) ::munmap(data_, mapped_);
}

}  // namespace pinfer
