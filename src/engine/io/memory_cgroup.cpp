#include "io/memory_cgroup.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

namespace jask {
namespace {

// A v1 "no limit" is the largest page-aligned int64; anything this large is none.
constexpr int64_t kNoLimit = int64_t{1} << 60;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The file's first number; -1 for "max", a missing file or no number.
int64_t read_number(const std::string& path) {
  const std::string text = read_text(path);
  int64_t v = -1;
  const char* begin = text.data();
  const auto [end, ec] = std::from_chars(begin, begin + text.size(), v);
  return ec == std::errc() && end != begin ? v : -1;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    const size_t at = s.find(sep, start);
    out.push_back(
        s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

struct Hierarchy {
  std::string mount;  // where it is mounted
  std::string path;   // this process's cgroup in it
  bool v2 = false;
};

// Each line of mountinfo: "id parent dev root mountpoint options ... - type source superoptions".
std::string mount_point(std::string_view mountinfo, bool v2) {
  for (std::string_view line : split(mountinfo, '\n')) {
    const size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    const std::vector<std::string_view> head = split(line.substr(0, dash), ' ');
    const std::vector<std::string_view> tail = split(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    if (v2 ? tail[0] == "cgroup2"
           : tail[0] == "cgroup" && std::ranges::count(split(tail[2], ','), "memory") > 0)
      return std::string(head[4]);
  }
  return {};
}

std::vector<Hierarchy> hierarchies(std::string_view proc_cgroup, std::string_view mountinfo) {
  std::vector<Hierarchy> out;
  for (std::string_view line : split(proc_cgroup, '\n')) {
    // "hierarchy-id:controllers:path"; v2's is "0::path".
    const size_t a = line.find(':'), b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(a + 1, b - a - 1);
    const bool v2 = line.substr(0, a) == "0" && controllers.empty();
    if (!v2 && std::ranges::count(split(controllers, ','), "memory") == 0) continue;
    std::string mount = mount_point(mountinfo, v2);
    if (!mount.empty()) out.push_back({std::move(mount), std::string(line.substr(b + 1)), v2});
  }
  return out;
}

}  // namespace

int64_t memory_cgroup_headroom(std::string_view proc_cgroup, std::string_view mountinfo,
                               const std::string& root) {
  int64_t least = -1;
  for (const Hierarchy& h : hierarchies(proc_cgroup, mountinfo)) {
    // From this process's cgroup up to the hierarchy's root: the tightest level binds.
    for (std::string path = h.path;;) {
      const std::string dir = root + h.mount + (path == "/" ? "" : path) + "/";
      const int64_t limit = read_number(dir + (h.v2 ? "memory.max" : "memory.limit_in_bytes"));
      const int64_t usage = read_number(dir + (h.v2 ? "memory.current" : "memory.usage_in_bytes"));
      if (limit >= 0 && limit < kNoLimit && usage >= 0) {
        const int64_t room = std::max<int64_t>(0, limit - usage);
        least = least < 0 ? room : std::min(least, room);
      }
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return least;
}

int64_t memory_cgroup_headroom() {
  return memory_cgroup_headroom(read_text("/proc/self/cgroup"), read_text("/proc/self/mountinfo"),
                                "");
}

}  // namespace jask
