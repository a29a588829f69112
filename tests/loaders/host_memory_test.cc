// Committed memory is resident when Allocate returns (every page), a mapped file's pages
// become resident when populated, and locking either names the memlock limit when refused.
#include "loaders/host_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/mapped_file.h"
#include "tests/testing/memory_limits.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

constexpr size_t kMiB = 1 << 20;

size_t Page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

TEST(CommittedMemory, EveryPageIsResidentWhenAllocateReturns) {
  for (bool huge : {false, true}) {
    auto m = CommittedMemory::Allocate(24 * kMiB + 100, {.huge_pages = huge}, "a test buffer");
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_NE((*m)->data(), nullptr);
    EXPECT_EQ((*m)->size(), 24 * kMiB + 100);
    EXPECT_EQ(ResidentPageBytes((*m)->data(), (*m)->size()), 24 * kMiB + 100);
    EXPECT_EQ((*m)->huge_pages(), huge && TransparentHugePagesOffered());
    EXPECT_FALSE((*m)->locked());
    EXPECT_GE((*m)->commit_seconds(), 0.0);
    if ((*m)->huge_pages()) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>((*m)->data()) % (2 * kMiB), 0u);
    }
  }
  auto empty = CommittedMemory::Allocate(0, {}, "nothing");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->data(), nullptr);
}

TEST(CommittedMemory, AnUntouchedMappingIsNotResident) {
  // What CommittedMemory prevents: plain anonymous memory is address space until written.
  const size_t bytes = 8 * kMiB;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(ResidentPageBytes(p, bytes), 0u);
  static_cast<char*>(p)[Page() + 5] = 1;
  EXPECT_EQ(ResidentPageBytes(p, bytes), Page());
  EXPECT_EQ(ResidentPageBytes(static_cast<char*>(p) + Page() + 7, 10), 10u);
  munmap(p, bytes);
}

TEST(CommittedMemory, LockedWhenAskedAndAllowed) {
  struct rlimit rl;
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
  auto m = CommittedMemory::Allocate(4 * kMiB, {.lock = true}, "a locked buffer");
  if (!m.ok()) {
    // Without CAP_IPC_LOCK and a memlock limit under 4 MiB the refusal must say so.
    EXPECT_NE(m.status().message().find("RLIMIT_MEMLOCK"), std::string_view::npos) << m.status();
    GTEST_SKIP() << "mlock refused here (memlock limit " << MemlockLimitText() << ")";
  }
  EXPECT_TRUE((*m)->locked());
  EXPECT_EQ(ResidentPageBytes((*m)->data(), (*m)->size()), 4 * kMiB);
}

TEST(CommittedMemory, LockRefusalNamesTheLimit) {
  // An address range that is not mapped: mlock fails whatever the limit, and the message
  // still names what was asked and how to raise the limit.
  void* p = mmap(nullptr, Page(), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  munmap(p, Page());
  const absl::Status s = LockPages(p, Page(), "the test's weights");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--mlock: cannot lock"), std::string_view::npos) << s;
  EXPECT_NE(s.message().find("the test's weights"), std::string_view::npos) << s;
  EXPECT_NE(s.message().find("RLIMIT_MEMLOCK"), std::string_view::npos) << s;
  EXPECT_NE(s.message().find("ulimit -l"), std::string_view::npos) << s;
}

// A real refusal: in a child without CAP_IPC_LOCK and with a memlock limit of 64 KiB, locking
// 4 MiB fails, and the message names the bytes, the limit and how to raise it.
TEST(CommittedMemory, LockBeyondTheMemlockLimitIsRefusedNamingIt) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    std::string report;
    int rc = 0;
    if (!testing::DropMemlockPrivilege(64 << 10, &report)) {
      rc = 77;
    } else {
      auto m = CommittedMemory::Allocate(4 * kMiB, {.lock = true}, "the test's pool");
      report = m.ok() ? "locked 4 MiB past a 64 KiB limit" : std::string(m.status().message());
      rc = m.ok() ? 1 : 0;
    }
    (void)!write(fds[1], report.data(), report.size());
    _exit(rc);
  }
  close(fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) message.append(buf, n);
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot drop CAP_IPC_LOCK here: " << message;
  ASSERT_EQ(WEXITSTATUS(status), 0) << message;
  EXPECT_NE(message.find("--mlock: cannot lock 4.00 MiB of the test's pool"), std::string::npos)
      << message;
  EXPECT_NE(message.find("RLIMIT_MEMLOCK"), std::string::npos) << message;
  EXPECT_NE(message.find("is 64.00 KiB"), std::string::npos) << message;
  EXPECT_NE(message.find("ulimit -l"), std::string::npos) << message;
}

TEST(PopulateForRead, MakesAMappedFilesPagesResident) {
  const std::string path = testing::TempDir("host_memory") + "/data.bin";
  {
    std::ofstream out(path, std::ios::binary);
    std::vector<char> block(kMiB, 'x');
    for (int i = 0; i < 6; ++i) out.write(block.data(), static_cast<std::streamsize>(block.size()));
  }
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  // Drop the file's cached pages (written back first) so that populating must read them.
  {
    FILE* f = std::fopen(path.c_str(), "r");
    ASSERT_NE(f, nullptr);
    fdatasync(fileno(f));
    posix_fadvise(fileno(f), 0, 0, POSIX_FADV_DONTNEED);
    std::fclose(f);
  }
  const uint8_t* data = (*file)->data();

  ASSERT_TRUE(PopulateForRead(data + 100, 4 * kMiB).ok());
  EXPECT_GE(ResidentPageBytes(data, (*file)->size()), 4 * kMiB);
  EXPECT_EQ(ResidentPageBytes(data + 100, 4 * kMiB), 4 * kMiB);
}

}  // namespace
}  // namespace pinfer
