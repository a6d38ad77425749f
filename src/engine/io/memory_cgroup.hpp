// How many more bytes this process's memory cgroup can charge before it hits
// its limit and the kernel reclaims within it: what a buffered read's page
// cache may still grow into for free. kAuto reads (io/file.hpp) go direct,
// unmeasured, wherever there is a limit.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace jask {

// The least (limit - usage) over this process's memory cgroup and its
// ancestors (cgroup v2 memory.max / memory.current, v1 memory.limit_in_bytes /
// memory.usage_in_bytes), 0 when a usage is at or above its limit; -1 when no
// level has a limit, or none could be read.
int64_t memory_cgroup_headroom();

// The same from the text of /proc/self/cgroup and /proc/self/mountinfo, with
// the cgroup files read under `root` + mount point (tests give a folder).
int64_t memory_cgroup_headroom(std::string_view proc_cgroup, std::string_view mountinfo,
                               const std::string& root);

}  // namespace jask
