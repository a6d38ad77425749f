#include "storage/io_config.hpp"

#include <atomic>

#include "io/memory_cgroup.hpp"

namespace jask {
namespace {

struct IoConfig {
  std::atomic<bool> direct{true};
  ReadCalibration reads{ReadMode::kAuto, memory_cgroup_headroom};
  IoCounters counters;
};

IoConfig& config() {
  static IoConfig c;
  return c;
}

}  // namespace

IoPolicy io_policy() {
  IoConfig& c = config();
  IoPolicy io{c.direct.load(std::memory_order_relaxed), c.reads.mode(), &c.reads, &c.counters};
  io.buffered_by_request = c.reads.buffered_by_request();
  return io;
}

IoPolicy header_io_policy() {
  IoPolicy io = io_policy();
  io.header = true;
  return io;
}

void set_direct_io_enabled(bool enabled) { config().direct = enabled; }
bool direct_io_enabled() { return config().direct; }

void set_read_mode(ReadMode mode) { config().reads.reset(mode); }
ReadMode read_mode() { return config().reads.mode(); }

IoCounters& io_counters() { return config().counters; }

}  // namespace jask
