// Memory limits a test can impose on the processes it starts:
//  - a memory cgroup with a limit, where this machine lets a test make one (root with a
//    writable cgroup file system: cgroup v1's memory hierarchy, or v2 with the memory
//    controller enabled below the test's own cgroup). In a container without that privilege
//    Create says why not, and the test does what it can without a real limit;
//  - a memlock limit that binds even a root process (DropMemlockPrivilege).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pinfer::testing {

class MemoryCgroup {
 public:
  // A new cgroup named `name` (made unique with the test's pid) beside or below the test's
  // own, limited to `limit` bytes; nullptr with *why_not set when it cannot be made.
  static std::unique_ptr<MemoryCgroup> Create(const std::string& name, uint64_t limit,
                                              std::string* why_not);
  // Removes the cgroup (its processes must have ended).
  ~MemoryCgroup();

  // argv run inside the cgroup: a shell that moves itself in, then execs argv.
  std::vector<std::string> Wrap(const std::vector<std::string>& argv) const;
  // Processes the kernel's OOM killer ended in the cgroup (-1 when it cannot be read).
  int64_t OomKills() const;
  // The most memory the cgroup's processes held at once (0 when it cannot be read).
  uint64_t PeakBytes() const;
  const std::string& dir() const { return dir_; }
  bool v2() const { return v2_; }

 private:
  MemoryCgroup(std::string dir, bool v2) : dir_(std::move(dir)), v2_(v2) {}
  std::string dir_;
  bool v2_;
};

// For a forked child before it runs what is tested (or execs it): drops CAP_IPC_LOCK from
// this process's capability sets and bounding set (so an exec'd program, even as root, does
// not get it back) and sets RLIMIT_MEMLOCK (soft and hard) to limit_bytes, so mlock() is
// held to that limit. False with *why_not set when the system refuses.
bool DropMemlockPrivilege(uint64_t limit_bytes, std::string* why_not);

}  // namespace pinfer::testing
