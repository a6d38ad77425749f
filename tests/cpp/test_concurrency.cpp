// Running calls at once: every index once, the first exception rethrown after
// all have ended; and a copy cut between the cores that writes exactly the
// bytes asked for, whatever the size and alignment.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "base/concurrency.hpp"

namespace jask {
namespace {

TEST(Concurrency, RunsEveryIndexOnceAndRethrowsAfterAllEnded) {
  std::vector<std::atomic<int>> calls(5);
  run_concurrently(calls.size(), [&](size_t i) { ++calls[i]; });
  for (const auto& c : calls) EXPECT_EQ(c.load(), 1);

  std::atomic<int> ended{0};
  EXPECT_THROW(run_concurrently(4,
                                [&](size_t i) {
                                  ++ended;
                                  if (i == 1) throw std::runtime_error("call 1 failed");
                                }),
               std::runtime_error);
  EXPECT_EQ(ended.load(), 4);
}

// Bytes of a source pattern copied into the middle of a guarded destination.
void expect_copy(size_t n, size_t src_offset, size_t dst_offset) {
  constexpr size_t kGuard = 64;
  std::vector<std::byte> src(src_offset + n), dst(dst_offset + n + kGuard, std::byte{0xEE});
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>((i * 131 + 7) % 251);
  copy_on_all_cores(dst.data() + dst_offset, src.data() + src_offset, n);
  for (size_t i = 0; i < dst_offset; ++i) ASSERT_EQ(dst[i], std::byte{0xEE}) << "before, at " << i;
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(dst[dst_offset + i], src[src_offset + i]) << "n " << n << ", byte " << i;
  for (size_t i = dst_offset + n; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], std::byte{0xEE}) << "after, at " << i;
}

TEST(Concurrency, CopyOnAllCoresWritesExactlyTheBytesAskedFor) {
  // Small copies stay on the caller; 8 MiB and more are cut between threads,
  // at sizes and offsets that are no multiple of a cache line.
  for (size_t n : {size_t{0}, size_t{1}, size_t{63}, (size_t{4} << 20) - 1, (size_t{8} << 20) + 13,
                   (size_t{17} << 20) + 5}) {
    expect_copy(n, 0, 0);
    expect_copy(n, 3, 61);
  }
}

}  // namespace
}  // namespace jask
