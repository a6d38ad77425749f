// Scattered runs read and written with many requests in flight: every run
// lands where it belongs whatever the order and the depth, runs that continue
// each other in file and memory become one request, and errors come back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "io/file.hpp"
#include "io/runs.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::policy;
using test::TempDir;

constexpr size_t kFileBytes = 64 * kIoAlignment + 123;

std::vector<char> pattern(size_t n, int salt) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>((i * 131 + static_cast<size_t>(salt) * 17 + i / 4093) & 0xff);
  return v;
}

// `count` runs at random offsets and lengths (some overlapping in the file,
// some at its very end), each with its own place in `memory`, shuffled.
struct RandomRuns {
  std::vector<uint64_t> offsets;
  std::vector<size_t> lengths, at;  // at: where in memory
  size_t memory_bytes = 0;
};

RandomRuns random_runs(int count, unsigned seed) {
  std::mt19937_64 rng(seed);
  RandomRuns r;
  for (int i = 0; i < count; ++i) {
    const size_t len = 1 + rng() % (i % 7 == 0 ? 3 * kIoAlignment : 700);
    const uint64_t offset = i % 11 == 0 ? kFileBytes - len : rng() % (kFileBytes - len + 1);
    r.offsets.push_back(offset);
    r.lengths.push_back(len);
    r.at.push_back(r.memory_bytes);
    r.memory_bytes += len + rng() % 3;  // some runs follow each other in memory, some not
  }
  return r;
}

void check_reads(const std::string& path, int in_flight, bool direct) {
  const std::vector<char> model = pattern(kFileBytes, 1);
  test::write_file_bytes(path, model);
  File file(path, OpenMode::kReadOnly);
  const RandomRuns r = random_runs(400, static_cast<unsigned>(in_flight));
  AlignedBuffer memory(r.memory_bytes);
  std::memset(memory.data(), 0x5a, memory.size());
  std::vector<ReadRun> runs;
  for (size_t i = 0; i < r.offsets.size(); ++i)
    runs.push_back(ReadRun{r.offsets[i], r.lengths[i], memory.data() + r.at[i]});
  std::shuffle(runs.begin(), runs.end(), std::mt19937(7));
  read_runs(file, runs, policy(direct), in_flight);
  for (size_t i = 0; i < r.offsets.size(); ++i) {
    ASSERT_EQ(std::memcmp(memory.data() + r.at[i], model.data() + r.offsets[i], r.lengths[i]), 0)
        << "run " << i << ": " << r.lengths[i] << " bytes at " << r.offsets[i] << ", " << in_flight
        << " in flight";
  }
}

TEST(IoRuns, ReadsEveryRunWhereItBelongsAtAnyDepth) {
  TempDir dir;
  for (int in_flight : {1, 3, 32}) {
    check_reads(dir.file("data.bin"), in_flight, /*direct=*/true);
    check_reads(dir.file("data.bin"), in_flight, /*direct=*/false);
    if (HasFatalFailure()) return;
  }
}

TEST(IoRuns, WritesEveryRunAndNothingElse) {
  TempDir dir;
  const std::string path = dir.file("data.bin");
  for (int in_flight : {1, 32}) {
    std::vector<char> model = pattern(kFileBytes, 1);
    test::write_file_bytes(path, model);
    File file(path, OpenMode::kReadWrite);
    // Disjoint runs: every third stretch of a random partition of the file.
    std::mt19937_64 rng(static_cast<unsigned>(in_flight));
    const std::vector<char> data = pattern(kFileBytes, 2);
    std::vector<WriteRun> runs;
    for (uint64_t at = 0, k = 0; at < kFileBytes; ++k) {
      const size_t len = std::min<size_t>(1 + rng() % 9000, kFileBytes - at);
      if (k % 3 == 0) {
        runs.push_back(WriteRun{at, len, reinterpret_cast<const std::byte*>(data.data()) + at});
        std::copy_n(data.begin() + static_cast<ptrdiff_t>(at), len,
                    model.begin() + static_cast<ptrdiff_t>(at));
      }
      at += len;
    }
    std::shuffle(runs.begin(), runs.end(), std::mt19937(3));
    write_runs(file, runs, policy(true), in_flight);
    ASSERT_EQ(test::read_file_bytes(path), model) << in_flight << " in flight";
  }
}

TEST(IoRuns, RunsThatContinueEachOtherInFileAndMemoryAreOneRequest) {
  TempDir dir;
  const std::string path = dir.file("data.bin");
  test::write_file_bytes(path, pattern(kFileBytes, 1));
  File file(path, OpenMode::kReadWrite);
  if (!file.has_direct()) GTEST_SKIP() << dir.path() << " refuses O_DIRECT";
  AlignedBuffer memory(2 * kIoAlignment);
  // Two halves of one aligned page: alone each is unaligned (buffered); as
  // one request the page goes direct.
  const size_t half = kIoAlignment / 2;
  std::vector<ReadRun> runs{{kIoAlignment + half, half, memory.data() + half},
                            {kIoAlignment, half, memory.data()}};
  IoCounters counters;
  read_runs(file, runs, policy(true, &counters));
  EXPECT_EQ(counters.direct_bytes, kIoAlignment);
  EXPECT_EQ(counters.buffered_bytes, 0u);
  // Adjacent in the file but not in memory: two buffered requests.
  IoCounters apart;
  runs[0].dst = memory.data() + kIoAlignment;
  read_runs(file, runs, policy(true, &apart));
  EXPECT_EQ(apart.direct_bytes, 0u);
  EXPECT_EQ(apart.buffered_bytes, kIoAlignment);
  const std::vector<char> model = pattern(kFileBytes, 1);
  EXPECT_EQ(std::memcmp(memory.data(), model.data() + kIoAlignment, half), 0);
  EXPECT_EQ(std::memcmp(memory.data() + kIoAlignment, model.data() + kIoAlignment + half, half), 0);
}

TEST(IoRuns, OverlappingWritesAreRefusedBeforeAnyIsMade) {
  TempDir dir;
  const std::string path = dir.file("data.bin");
  const std::vector<char> model = pattern(kFileBytes, 1);
  test::write_file_bytes(path, model);
  File file(path, OpenMode::kReadWrite);
  std::vector<std::byte> data(100, std::byte{9});
  std::vector<WriteRun> runs{{1000, 100, data.data()}, {1050, 100, data.data()}};
  EXPECT_THROW(write_runs(file, runs, policy(true)), ValueError);
  EXPECT_EQ(test::read_file_bytes(path), model);
}

TEST(IoRuns, AFailedRequestIsRethrownAfterTheOthersEnd) {
  TempDir dir;
  const std::string path = dir.file("data.bin");
  test::write_file_bytes(path, pattern(kFileBytes, 1));
  File file(path, OpenMode::kReadOnly);
  std::vector<std::byte> memory(64 * 100);
  std::vector<ReadRun> runs;
  for (int i = 0; i < 64; ++i) runs.push_back(ReadRun{uint64_t(i) * 1000, 100, &memory[i * 100]});
  runs[40].offset = kFileBytes + 5000;  // past the end
  EXPECT_THROW(read_runs(file, runs, policy(true), 8), IoError);
  // A read-only file refuses writes, from every thread.
  std::vector<WriteRun> writes;
  for (int i = 0; i < 16; ++i) writes.push_back(WriteRun{uint64_t(i) * 200, 100, &memory[0]});
  EXPECT_THROW(write_runs(file, writes, policy(true), 4), ReadOnlyError);
}

TEST(IoRuns, NoRunsAndEmptyRunsDoNothing) {
  TempDir dir;
  const std::string path = dir.file("data.bin");
  test::write_file_bytes(path, pattern(kFileBytes, 1));
  File file(path, OpenMode::kReadWrite);
  IoCounters counters;
  read_runs(file, {}, policy(true, &counters));
  std::vector<ReadRun> empty{{kFileBytes + 10, 0, nullptr}};
  read_runs(file, empty, policy(true, &counters));
  write_runs(file, std::vector<WriteRun>{{5, 0, nullptr}}, policy(true, &counters));
  EXPECT_EQ(counters.direct_bytes + counters.buffered_bytes, 0u);
}

}  // namespace
}  // namespace jask
