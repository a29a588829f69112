#include "tests/testing/memory_limits.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tests/testing/test_models.h"

namespace pinfer::testing {
namespace {

bool Write(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// The value after "key " on its line of a "key value" text, -1 when absent.
int64_t Field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return -1;
}

// This process's cgroup path in the v2 hierarchy ("0::/path") or the v1 memory one.
std::string OwnPath(bool v2) {
  std::istringstream in(ReadTextFile("/proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const bool memory_v1 = ("," + controllers + ",").find(",memory,") != std::string::npos;
    if ((v2 && line.rfind("0::", 0) == 0) || (!v2 && memory_v1)) return line.substr(b + 1);
  }
  return "";
}

}  // namespace

std::unique_ptr<MemoryCgroup> MemoryCgroup::Create(const std::string& name, uint64_t limit,
                                                   std::string* why_not) {
  const std::string leaf = name + "-" + std::to_string(::getpid());
  struct Candidate {
    std::string parent;
    bool v2;
  };
  std::vector<Candidate> candidates;
  if (const std::string p = OwnPath(false); !p.empty()) {
    candidates.push_back({"/sys/fs/cgroup/memory" + (p == "/" ? "" : p), false});
  }
  if (const std::string p = OwnPath(true); !p.empty()) {
    candidates.push_back({"/sys/fs/cgroup" + (p == "/" ? "" : p), true});
  }
  std::string why = "no cgroup file system is mounted at /sys/fs/cgroup";
  for (const Candidate& c : candidates) {
    const std::string dir = c.parent + "/" + leaf;
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      why = "cannot create " + dir + ": " + std::strerror(errno);
      continue;
    }
    const std::string limit_file = dir + (c.v2 ? "/memory.max" : "/memory.limit_in_bytes");
    if (!Write(limit_file, std::to_string(limit))) {
      why = "cannot set " + limit_file + " (the memory controller is not enabled there)";
      ::rmdir(dir.c_str());
      continue;
    }
    if (c.v2) Write(dir + "/memory.swap.max", "0");
    return std::unique_ptr<MemoryCgroup>(new MemoryCgroup(dir, c.v2));
  }
  if (why_not) *why_not = why;
  return nullptr;
}

MemoryCgroup::~MemoryCgroup() { ::rmdir(dir_.c_str()); }

std::vector<std::string> MemoryCgroup::Wrap(const std::vector<std::string>& argv) const {
  std::vector<std::string> out = {"/bin/sh", "-c",
                                  "echo $$ > '" + dir_ + "/cgroup.procs' && exec \"$@\"", "sh"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

int64_t MemoryCgroup::OomKills() const {
  return v2_ ? Field(ReadTextFile(dir_ + "/memory.events"), "oom_kill")
             : Field(ReadTextFile(dir_ + "/memory.oom_control"), "oom_kill");
}

uint64_t MemoryCgroup::PeakBytes() const {
  const std::string text =
      ReadTextFile(dir_ + (v2_ ? "/memory.peak" : "/memory.max_usage_in_bytes"));
  return text.empty() ? 0 : std::stoull(text);
}

bool DropMemlockPrivilege(uint64_t limit_bytes, std::string* why_not) {
  auto fail = [why_not](const std::string& what) {
    if (why_not) *why_not = what + ": " + std::strerror(errno);
    return false;
  };
  if (::prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0) != 0 && errno != EINVAL) {
    return fail("prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK)");
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return fail("capget");
  const uint32_t bit = 1u << CAP_IPC_LOCK;  // CAP_IPC_LOCK (14) is in the first word
  data[0].effective &= ~bit;
  data[0].permitted &= ~bit;
  data[0].inheritable &= ~bit;
  if (::syscall(SYS_capset, &header, data) != 0) return fail("capset");
  const struct rlimit rl = {limit_bytes, limit_bytes};
  if (::setrlimit(RLIMIT_MEMLOCK, &rl) != 0) return fail("setrlimit(RLIMIT_MEMLOCK)");
  return true;
}

}  // namespace pinfer::testing
