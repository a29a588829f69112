// Host memory that is really the process's, and what is resident of memory already mapped.
//
// Linux lends anonymous memory lazily: an allocation is only address space until each page is
// first written, so a "reserved" buffer can be refused page by page much later (the kernel's
// OOM killer). CommittedMemory writes (populates) every page when it is allocated, so the
// memory is resident from then on, and a configuration that does not fit fails at start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pinfer {

class CommittedMemory {
 public:
  struct Options {
    // Ask for transparent huge pages (madvise MADV_HUGEPAGE) when the kernel offers them
    // (/sys/kernel/mm/transparent_hugepage/enabled is "always" or "madvise"): the mapping is
    // aligned to 2 MiB so whole huge pages fit in it.
    bool huge_pages = false;
    // mlock() the pages, so the OS never swaps them out.
    bool lock = false;
  };

  // An anonymous private mapping of `bytes` (rounded up to the page size), every page
  // committed before it returns: populated by the kernel (MADV_POPULATE_WRITE, Linux 5.14)
  // where offered, else written one byte per page. `what` names the memory in errors ("the
  // KV pool"). ResourceExhausted when the mapping or a page cannot be had; with lock, the
  // memlock refusal (LockPages). bytes == 0 gives an empty buffer (data() == nullptr).
  static absl::StatusOr<std::unique_ptr<CommittedMemory>> Allocate(size_t bytes, Options options,
                                                                   std::string_view what);
  ~CommittedMemory();
  CommittedMemory(const CommittedMemory&) = delete;
  CommittedMemory& operator=(const CommittedMemory&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }            // as asked (the mapping may be a page longer)
  bool huge_pages() const { return huge_pages_; }  // MADV_HUGEPAGE was accepted
  bool locked() const { return locked_; }
  double commit_seconds() const { return commit_seconds_; }  // mapping + populating + locking

 private:
  CommittedMemory() = default;
  uint8_t* data_ = nullptr;
  size_t size_ = 0, mapped_ = 0;
  bool huge_pages_ = false, locked_ = false;
  double commit_seconds_ = 0;
};

// Whether the kernel offers transparent huge pages to madvise (enabled is "always" or
// "madvise"); false when the setting cannot be read.
bool TransparentHugePagesOffered();

// Faults in the pages of [p, p + n) for reading (MADV_POPULATE_READ where offered, else one
// read per page): a mapped file's pages become resident now rather than mid-conversation.
absl::Status PopulateForRead(const void* p, size_t n);

// mlock()s the pages of [p, p + n). When the kernel refuses, the message names `what`, the
// bytes asked for, the memlock limit (RLIMIT_MEMLOCK, `ulimit -l`) and how to raise it.
absl::Status LockPages(const void* p, size_t n, std::string_view what);

// Drops this process's pages of a read-only file mapping that lie wholly inside [p, p + n)
// (madvise MADV_DONTNEED on the page-aligned interior; the partial pages at either end, which
// may hold other tensors, stay): its resident memory shrinks, the file's pages stay in the page
// cache, and a later read of the range faults them back in. Only for unmodified pages of a
// mapped file (anonymous memory would read back as zeros). Returns the bytes released (0 when
// refused, e.g. for locked pages).
size_t ReleaseFilePages(const void* p, size_t n);

// Bytes of [p, p + n) that lie in pages resident now (mincore); 0 when it cannot be asked.
uint64_t ResidentPageBytes(const void* p, size_t n);

// "8.00 MiB" for the soft RLIMIT_MEMLOCK, "unlimited", or "unknown".
std::string MemlockLimitText();

}  // namespace pinfer
