// The room a memory cgroup leaves the page cache, and kAuto's calibration
// reading direct, unmeasured, wherever there is a limit.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "io/file.hpp"
#include "io/memory_cgroup.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

void put(const std::string& dir, const std::string& name, const std::string& text) {
  fs::create_directories(dir);
  std::ofstream(dir + "/" + name) << text;
}

const char* kMountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "40 23 0:40 / /sys/fs/cgroup2 rw,relatime - cgroup2 cgroup2 rw\n";

TEST(MemoryCgroup, V1TheTightestLevelFromTheProcessesCgroupUpBinds) {
  TempDir root;
  const std::string mem = root.path() + "/sys/fs/cgroup/memory";
  put(mem, "memory.limit_in_bytes", "9223372036854771712\n");  // the root: no limit
  put(mem, "memory.usage_in_bytes", "5000000000\n");
  put(mem + "/outer", "memory.limit_in_bytes", "3000000000\n");
  put(mem + "/outer", "memory.usage_in_bytes", "2000000000\n");  // 1e9 left
  put(mem + "/outer/inner", "memory.limit_in_bytes", "1073741824\n");
  put(mem + "/outer/inner", "memory.usage_in_bytes", "573741824\n");  // 5e8 left
  const std::string cgroup = "8:pids:/\n4:memory:/outer/inner\n1:cpu:/\n0::/\n";
  EXPECT_EQ(memory_cgroup_headroom(cgroup, kMountinfo, root.path()), 500000000);
  put(mem + "/outer", "memory.usage_in_bytes", "2900000000\n");  // the outer one is tighter now
  EXPECT_EQ(memory_cgroup_headroom(cgroup, kMountinfo, root.path()), 100000000);
  put(mem + "/outer/inner", "memory.usage_in_bytes", "1100000000\n");  // over its limit
  EXPECT_EQ(memory_cgroup_headroom(cgroup, kMountinfo, root.path()), 0);
}

TEST(MemoryCgroup, V2ReadsMaxAndCurrentAndMaxIsNoLimit) {
  TempDir root;
  const std::string v2 = root.path() + "/sys/fs/cgroup2";
  put(v2 + "/a/b", "memory.max", "max\n");
  put(v2 + "/a/b", "memory.current", "1000\n");
  put(v2 + "/a", "memory.max", "max\n");
  put(v2 + "/a", "memory.current", "2000\n");
  const std::string cgroup = "0::/a/b\n";
  EXPECT_EQ(memory_cgroup_headroom(cgroup, kMountinfo, root.path()), -1);
  put(v2 + "/a", "memory.max", "10000\n");
  EXPECT_EQ(memory_cgroup_headroom(cgroup, kMountinfo, root.path()), 8000);
}

TEST(MemoryCgroup, NothingReadableIsNoLimit) {
  TempDir root;
  EXPECT_EQ(memory_cgroup_headroom("4:memory:/x\n0::/\n", kMountinfo, root.path()), -1);
  EXPECT_EQ(memory_cgroup_headroom("", "", root.path()), -1);
  // This process's own answer is a number either way (-1 or the room left).
  EXPECT_GE(memory_cgroup_headroom(), -1);
}

int64_t g_room = 0;
int64_t room() { return g_room; }

// Reads one whole phase of each way in turn, `phases` times, or until kAuto settles.
int phases_until_settled(ReadCalibration& calibration, int phases) {
  const size_t phase = static_cast<size_t>(ReadCalibration::kCalibrationTotal / 2);
  for (int p = 0; p < phases; ++p) {
    if (calibration.mode() != ReadMode::kAuto) return p;
    const bool direct = calibration.begin_read();
    calibration.end_read(direct, true, phase);
  }
  return calibration.mode() == ReadMode::kAuto ? -1 : phases;
}

TEST(MemoryCgroup, UnderALimitAutoReadsDirectUnmeasuredAndWithoutOneMeasuresBothWays) {
  // Without a limit: direct, buffered, direct, buffered, settled.
  g_room = -1;
  ReadCalibration unlimited(ReadMode::kAuto, room);
  EXPECT_EQ(phases_until_settled(unlimited, 10), 4);
  // Under a limit, with room or none: direct from the first read on.
  for (int64_t left : {int64_t{1} << 30, int64_t{0}}) {
    g_room = left;
    ReadCalibration capped(ReadMode::kAuto, room);
    EXPECT_EQ(capped.mode(), ReadMode::kAuto) << "nothing read yet";
    EXPECT_TRUE(capped.begin_read());
    EXPECT_EQ(capped.mode(), ReadMode::kDirect) << left;
    capped.end_read(true, true, 8 << 20);
    EXPECT_FALSE(capped.buffered_by_request());
    capped.reset(ReadMode::kBuffered);  // asked for: kept under a limit too
    capped.end_read(capped.begin_read(), true, 8 << 20);
    EXPECT_EQ(capped.mode(), ReadMode::kBuffered);
  }
  // A limit that appears after the first read is not looked for again until reset().
  g_room = -1;
  ReadCalibration later(ReadMode::kAuto, room);
  later.end_read(later.begin_read(), true, 8 << 20);
  g_room = 0;
  later.end_read(later.begin_read(), true, 8 << 20);
  EXPECT_EQ(later.mode(), ReadMode::kAuto);
  later.reset(ReadMode::kAuto);
  later.end_read(later.begin_read(), true, 8 << 20);
  EXPECT_EQ(later.mode(), ReadMode::kDirect);
}

}  // namespace
}  // namespace jask
