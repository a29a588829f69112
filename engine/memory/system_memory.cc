#include "engine/memory/system_memory.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/memory/memory_ledger.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

// v1 reports "no limit" as the largest page-aligned counter value.
constexpr uint64_t kNoLimitAbove = 1ull << 60;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The number after `key` on its line of a "key value [kB]" text; kib scales by 1024.
uint64_t KeyValue(std::string_view text, std::string_view key, bool kib) {
  for (absl::string_view line : absl::StrSplit(Sv(text), '\n')) {
    if (!absl::ConsumePrefix(&line, Sv(key))) continue;
    line = absl::StripAsciiWhitespace(line);
    absl::ConsumeSuffix(&line, "kB");
    uint64_t v = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &v)) return kib ? v * 1024 : v;
  }
  return 0;
}

// A single number in a cgroup file ("max" and v1's huge value: no limit, 0).
uint64_t CgroupNumber(const std::string& path) {
  const std::string text = ReadFile(path);
  uint64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &v) || v >= kNoLimitAbove) return 0;
  return v;
}

// The cgroup at `dir` (a directory of the v2 or v1 memory hierarchy), if it has a limit file.
std::optional<CgroupMemory> ReadCgroup(const std::string& dir, const std::string& path, bool v2) {
  const std::string limit_file = dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes");
  if (ReadFile(limit_file).empty()) return std::nullopt;
  CgroupMemory c;
  c.path = path;
  c.limit = CgroupNumber(limit_file);
  c.usage = CgroupNumber(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
  const std::string stat = ReadFile(dir + "/memory.stat");
  c.file = v2 ? KeyValue(stat, "active_file ", false) + KeyValue(stat, "inactive_file ", false)
              : KeyValue(stat, "total_active_file ", false) +
                    KeyValue(stat, "total_inactive_file ", false);
  return c;
}

// The process's cgroup path in one hierarchy and its ancestors, deepest first.
void AddWithAncestors(const std::string& root, std::string path, bool v2,
                      std::vector<CgroupMemory>* out) {
  for (;;) {
    if (auto c = ReadCgroup(root + (path == "/" ? "" : path), path, v2)) out->push_back(*c);
    if (path.empty() || path == "/") return;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

}  // namespace

uint64_t ParseMemAvailable(std::string_view meminfo) {
  return KeyValue(meminfo, "MemAvailable:", true);
}

uint64_t ParseRssAnon(std::string_view status) { return KeyValue(status, "RssAnon:", true); }

uint64_t AnonymousResidentBytes() { return ParseRssAnon(ReadFile("/proc/self/status")); }

std::vector<CgroupMemory> ProcessCgroups() {
  std::vector<CgroupMemory> out;
  // Lines "id:controllers:path": v2 is "0::/path"; v1's memory line names "memory".
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/self/cgroup"), '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    const std::string path(f[2]);
    if (f[0] == "0" && f[1].empty()) {
      AddWithAncestors("/sys/fs/cgroup", path, true, &out);
      continue;
    }
    for (absl::string_view ctl : absl::StrSplit(f[1], ',')) {
      if (ctl == "memory") AddWithAncestors("/sys/fs/cgroup/memory", path, false, &out);
    }
  }
  return out;
}

AvailableMemory CombineAvailable(uint64_t mem_available, const std::vector<CgroupMemory>& cgroups,
                                 std::optional<uint64_t> env_limit, uint64_t rss_anon) {
  AvailableMemory a;
  if (mem_available > 0) a = {mem_available, "MemAvailable"};
  auto consider = [&a](uint64_t room, std::string source) {
    if (a.bytes == 0 || room < a.bytes) a = {room, std::move(source)};
  };
  for (const CgroupMemory& c : cgroups) {
    if (c.limit == 0) continue;
    const uint64_t held = c.usage > c.file ? c.usage - c.file : 0;
    consider(c.limit > held ? c.limit - held : 1,
             absl::StrCat("memory cgroup ", c.path, ": limit ", FormatBytes(c.limit), ", ",
                          FormatBytes(held), " in use"));
  }
  if (env_limit) {
    consider(*env_limit > rss_anon ? *env_limit - rss_anon : 1,
             absl::StrCat(kMemoryLimitEnv, " ", FormatBytes(*env_limit), " less this process's ",
                          FormatBytes(rss_anon), " anonymous resident memory"));
  }
  return a;
}

absl::StatusOr<AvailableMemory> AvailableHostMemory() {
  std::optional<uint64_t> env_limit;
  if (const char* env = std::getenv(kMemoryLimitEnv); env != nullptr && *env != '\0') {
    absl::StatusOr<uint64_t> bytes = ParseBytes(env);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kMemoryLimitEnv, "=", env, ": ", bytes.status().message()));
    }
    env_limit = *bytes;
  }
  return CombineAvailable(ParseMemAvailable(ReadFile("/proc/meminfo")), ProcessCgroups(), env_limit,
                          AnonymousResidentBytes());
}

}  // namespace pinfer
