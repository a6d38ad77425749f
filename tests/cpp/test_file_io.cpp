// Positioned file I/O: every offset, length and memory alignment round-trips,
// through the O_DIRECT path and the buffered fallback alike.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "io/file.hpp"
#include "storage/scratch.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::policy;
using test::TempDir;

constexpr size_t kFileBytes = 8 * kIoAlignment;

std::vector<char> pattern(size_t n, int salt) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>((i * 31 + static_cast<size_t>(salt) * 7 + i / 251) & 0xff);
  return v;
}

// A file of pattern(bytes, salt) in a folder of its own on disk.
struct PatternFile {
  PatternFile(size_t bytes, int salt) : path(dir.file("data.bin")), data(pattern(bytes, salt)) {
    test::write_file_bytes(path, data);
  }
  TempDir dir;
  std::string path;
  std::vector<char> data;
};

// Bytes a test's policy moved each way since construction.
struct CounterDeltas {
  IoCounters counters;
  IoPolicy io(bool direct = true) { return policy(direct, &counters); }
  uint64_t direct() const { return counters.direct_bytes; }
  uint64_t buffered() const { return counters.buffered_bytes; }
};

// Writes `n` bytes at `offset` from memory `misalign` bytes past a 4096-byte
// boundary, checks the whole file against a model, then reads the range back
// into memory with the same misalignment.
void check_round_trip(const std::string& path, uint64_t offset, size_t n, size_t misalign,
                      const IoPolicy& io) {
  std::vector<char> model = pattern(kFileBytes, 1);
  test::write_file_bytes(path, model);
  std::vector<char> data = pattern(n, 2);

  File file(path, OpenMode::kReadWrite);
  AlignedBuffer src(n + misalign);
  std::memcpy(src.data() + misalign, data.data(), n);
  file.write_at(src.data() + misalign, n, offset, io);
  std::copy(data.begin(), data.end(), model.begin() + static_cast<ptrdiff_t>(offset));
  ASSERT_EQ(test::read_file_bytes(path), model)
      << "write at offset " << offset << ", " << n << " bytes, memory misaligned by " << misalign;

  AlignedBuffer dst(n + misalign);
  std::memset(dst.data(), 0x5a, n + misalign);
  file.read_at(dst.data() + misalign, n, offset, io);
  ASSERT_EQ(std::memcmp(dst.data() + misalign, data.data(), n), 0)
      << "read at offset " << offset << ", " << n << " bytes, memory misaligned by " << misalign;
}

void check_all_request_shapes(const std::string& path, const IoPolicy& io) {
  for (uint64_t offset : {0ul, 1ul, 100ul, 4095ul, 4096ul, 5000ul, 8192ul}) {
    for (size_t n : {1ul, 100ul, 4096ul, 4097ul, 8192ul + 17, 3 * 4096ul}) {
      // Aligned memory, unaligned memory, and memory congruent with the
      // offset (the aligned middle of the request can then go direct).
      for (size_t misalign : {size_t{0}, size_t{1}, static_cast<size_t>(offset % kIoAlignment)}) {
        check_round_trip(path, offset, n, misalign, io);
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(FileIo, EveryRequestShapeRoundTripsWithDirectIo) {
  TempDir dir;
  check_all_request_shapes(dir.file("data.bin"), policy(true));
}

TEST(FileIo, EveryRequestShapeRoundTripsWithTheBufferedFallback) {
  TempDir dir;
  check_all_request_shapes(dir.file("data.bin"), policy(false));
}

// The direct-I/O counters need a file system that accepts O_DIRECT.
bool direct_io_supported(const std::string& path) {
  File probe(path, OpenMode::kReadWrite);
  return probe.has_direct();
}

TEST(FileIo, AlignedRequestOnDiskGoesDirect) {
  TempDir dir;
  std::string path = dir.file("data.bin");
  test::write_file_bytes(path, pattern(kFileBytes, 1));
  if (!direct_io_supported(path)) GTEST_SKIP() << dir.path() << " refuses O_DIRECT";
  File file(path, OpenMode::kReadWrite);
  AlignedBuffer buf(4 * kIoAlignment);
  std::memset(buf.data(), 7, buf.size());

  CounterDeltas write_delta;
  file.write_at(buf.data(), buf.size(), kIoAlignment, write_delta.io());
  EXPECT_EQ(write_delta.direct(), buf.size());
  EXPECT_EQ(write_delta.buffered(), 0u);

  CounterDeltas read_delta;
  file.read_at(buf.data(), buf.size(), 0, read_delta.io());
  EXPECT_EQ(read_delta.direct(), buf.size());
  EXPECT_EQ(read_delta.buffered(), 0u);
}

TEST(FileIo, UnalignedEdgesAreBufferedAndTheAlignedMiddleGoesDirect) {
  TempDir dir;
  std::string path = dir.file("data.bin");
  test::write_file_bytes(path, pattern(kFileBytes, 1));
  if (!direct_io_supported(path)) GTEST_SKIP() << dir.path() << " refuses O_DIRECT";
  File file(path, OpenMode::kReadWrite);
  // Bytes [100, 100 + 3*4096): the middle [4096, 12288) is aligned in the
  // file and, with memory offset by 100 as well, in memory.
  const uint64_t offset = 100;
  const size_t n = 3 * kIoAlignment;
  AlignedBuffer buf(n + offset);

  CounterDeltas read_delta;
  file.read_at(buf.data() + offset, n, offset, read_delta.io());
  EXPECT_EQ(read_delta.direct(), 2 * kIoAlignment);
  EXPECT_EQ(read_delta.buffered(), n - 2 * kIoAlignment);

  CounterDeltas write_delta;
  file.write_at(buf.data() + offset, n, offset, write_delta.io());
  EXPECT_EQ(write_delta.direct(), 2 * kIoAlignment);
  EXPECT_EQ(write_delta.buffered(), n - 2 * kIoAlignment);
}

TEST(FileIo, DisablingDirectIoSendsEverythingThroughTheBufferedPath) {
  TempDir dir;
  std::string path = dir.file("data.bin");
  test::write_file_bytes(path, pattern(kFileBytes, 1));
  File file(path, OpenMode::kReadWrite);
  AlignedBuffer buf(4 * kIoAlignment);

  CounterDeltas delta;
  file.read_at(buf.data(), buf.size(), 0, delta.io(/*direct=*/false));
  file.write_at(buf.data(), buf.size(), 0, delta.io(/*direct=*/false));
  EXPECT_EQ(delta.direct(), 0u);
  EXPECT_EQ(delta.buffered(), 2 * buf.size());
}

TEST(FileIo, UnalignedMemoryIsNeverSentDirect) {
  TempDir dir;
  std::string path = dir.file("data.bin");
  test::write_file_bytes(path, pattern(kFileBytes, 1));
  File file(path, OpenMode::kReadWrite);
  AlignedBuffer buf(4 * kIoAlignment + 1);

  CounterDeltas delta;
  file.read_at(buf.data() + 1, 4 * kIoAlignment, 0, delta.io());
  EXPECT_EQ(delta.direct(), 0u);
  EXPECT_EQ(delta.buffered(), 4 * kIoAlignment);
}

TEST(FileIo, AShortReadIntoMisalignedMemoryGoesDirectThroughTheBounceBuffer) {
  const PatternFile f(kFileBytes, 3);
  const std::vector<char>& data = f.data;
  if (!direct_io_supported(f.path)) GTEST_SKIP() << f.dir.path() << " refuses O_DIRECT";
  File file(f.path, OpenMode::kReadWrite);
  AlignedBuffer bounce(8 * kIoAlignment);
  // A row of a tile at file offset 128 + 5000 (a .npy's data starts at 128),
  // landing at memory aligned to 4096: read_at would go buffered.
  const uint64_t offset = 128 + 5000;
  const size_t n = 3 * kIoAlignment + 7;
  AlignedBuffer dst(n + kIoAlignment);
  CounterDeltas delta;
  file.read_at_through(dst.data(), n, offset, delta.io(), bounce);
  ASSERT_EQ(std::memcmp(dst.data(), data.data() + offset, n), 0);
  EXPECT_EQ(delta.buffered(), 0u);
  EXPECT_EQ(delta.direct(), 4 * kIoAlignment);  // the aligned pages around it
}

TEST(FileIo, ReadThroughFallsBackToReadAtWhereTheBounceCannotServe) {
  const PatternFile f(kFileBytes - 10, 4);  // its last page is partial
  const std::vector<char>& data = f.data;
  File file(f.path, OpenMode::kReadWrite);
  AlignedBuffer bounce(2 * kIoAlignment), dst(kFileBytes);
  struct Case {
    uint64_t offset;
    size_t n;
    bool direct;
    const char* why;
  };
  const Case cases[] = {
      {100, 3 * kIoAlignment, true, "larger than the bounce buffer"},
      {kFileBytes - 60, 50, true, "its last page past the end of the file"},
      {100, 200, false, "direct I/O off"},
  };
  for (const Case& c : cases) {
    std::memset(dst.data(), 0, dst.size());
    CounterDeltas delta;
    file.read_at_through(dst.data(), c.n, c.offset, delta.io(c.direct), bounce);
    ASSERT_EQ(std::memcmp(dst.data(), data.data() + c.offset, c.n), 0) << c.why;
    EXPECT_EQ(delta.direct(), 0u) << c.why;  // memory misaligned: read_at reads it buffered
  }
}

// A row of a tile at file offset 128 + 5000, its memory at that alignment:
// the four pages around it are read direct straight into the memory around
// it, with no bounce buffer; the bytes around the row are the file's.
TEST(FileIo, ReadInPlaceReadsThePagesAroundARunStraightIntoItsMemory) {
  const PatternFile f(kFileBytes, 7);
  const std::vector<char>& data = f.data;
  if (!direct_io_supported(f.path)) GTEST_SKIP() << f.dir.path() << " refuses O_DIRECT";
  File file(f.path, OpenMode::kReadWrite);
  const uint64_t offset = 128 + 5000, start = offset / kIoAlignment * kIoAlignment;
  const size_t n = 3 * kIoAlignment + 7;
  AlignedBuffer buffer(6 * kIoAlignment);
  std::memset(buffer.data(), 0, buffer.size());
  std::byte* dst = buffer.data() + offset % kIoAlignment;
  CounterDeltas delta;
  file.read_in_place(dst, n, offset, delta.io());
  ASSERT_EQ(std::memcmp(dst, data.data() + offset, n), 0);
  EXPECT_EQ(std::memcmp(buffer.data(), data.data() + start, 4 * kIoAlignment), 0);
  EXPECT_EQ(delta.buffered(), 0u);
  EXPECT_EQ(delta.direct(), 4 * kIoAlignment);
  EXPECT_EQ(delta.counters.read_bytes.load(), n);
}

// Where the pages around the run cannot be read direct, read_in_place is
// read_at: exactly the run's bytes, nothing around them touched.
TEST(FileIo, ReadInPlaceFallsBackToReadAtTouchingOnlyTheRun) {
  const PatternFile f(kFileBytes - 10, 8);  // its last page is partial
  const std::vector<char>& data = f.data;
  File file(f.path, OpenMode::kReadWrite);
  struct Case {
    uint64_t offset;
    size_t n, misalign;
    bool direct, buffered_asked;
    const char* why;
  };
  const Case cases[] = {
      {kFileBytes - 60, 50, 0, true, false, "its last page past the end of the file"},
      {100, 200, 0, false, false, "direct I/O off"},
      {100, 200, 0, true, true, "buffered reads asked for"},
      {100, 200, 1, true, false, "memory not at the offset's alignment"},
  };
  for (const Case& c : cases) {
    AlignedBuffer buffer(2 * kIoAlignment);
    std::memset(buffer.data(), 0x5a, buffer.size());
    std::byte* dst = buffer.data() + c.offset % kIoAlignment + c.misalign;
    IoCounters counters;
    IoPolicy io = policy(c.direct, &counters);
    if (c.buffered_asked) io.read_mode = ReadMode::kBuffered;
    file.read_in_place(dst, c.n, c.offset, io);
    ASSERT_EQ(std::memcmp(dst, data.data() + c.offset, c.n), 0) << c.why;
    for (std::byte* p = buffer.data(); p < buffer.data() + buffer.size(); ++p) {
      if (p < dst || p >= dst + c.n) {
        ASSERT_EQ(*p, std::byte{0x5a}) << c.why;
      }
    }
    EXPECT_EQ(counters.direct_bytes.load(), 0u) << c.why;
  }
}

// Buffered reads asked for read the run through the page cache; buffered reads
// that kAuto measured faster (on large reads) still read it direct.
TEST(FileIo, ReadThroughGoesBufferedOnlyWhenBufferedReadsWereAskedFor) {
  const PatternFile f(kFileBytes, 6);
  const std::vector<char>& data = f.data;
  if (!direct_io_supported(f.path)) GTEST_SKIP() << f.dir.path() << " refuses O_DIRECT";
  File file(f.path, OpenMode::kReadWrite);
  AlignedBuffer bounce(8 * kIoAlignment), dst(4 * kIoAlignment);
  const uint64_t offset = 128 + 3 * kIoAlignment;
  const size_t n = 2 * kIoAlignment;
  for (bool asked : {true, false}) {
    std::memset(dst.data(), 0, dst.size());
    IoCounters counters;
    IoPolicy io{true, ReadMode::kBuffered, nullptr, &counters};
    io.buffered_by_request = asked;
    file.read_at_through(dst.data(), n, offset, io, bounce);
    ASSERT_EQ(std::memcmp(dst.data(), data.data() + offset, n), 0) << asked;
    EXPECT_EQ(counters.buffered_bytes.load(), asked ? n : 0u) << asked;
    EXPECT_EQ(counters.direct_bytes.load(), asked ? 0u : 3 * kIoAlignment) << asked;
  }
}

TEST(FileIo, ACalibrationTellsAskedForBufferedReadsFromMeasuredOnes) {
  ReadCalibration calibration(ReadMode::kBuffered);
  EXPECT_TRUE(calibration.buffered_by_request());
  calibration.reset(ReadMode::kAuto);
  EXPECT_FALSE(calibration.buffered_by_request());
  // kAuto settles from its phases' bytes (which way wins depends on the clock;
  // neither is a request).
  const size_t phase = static_cast<size_t>(ReadCalibration::kCalibrationTotal / 2);
  for (int r = 0; r < 4 && calibration.mode() == ReadMode::kAuto; ++r) {
    const bool direct = calibration.begin_read();
    calibration.end_read(direct, true, phase);
  }
  EXPECT_NE(calibration.mode(), ReadMode::kAuto);
  EXPECT_FALSE(calibration.buffered_by_request());
  calibration.reset(ReadMode::kAuto);
  calibration.end_read(calibration.begin_read(), false, 0);  // O_DIRECT refused
  EXPECT_EQ(calibration.mode(), ReadMode::kBuffered);
  EXPECT_TRUE(calibration.buffered_by_request());
  calibration.reset(ReadMode::kDirect);
  EXPECT_FALSE(calibration.buffered_by_request());
}

// tmpfs refused O_DIRECT before Linux 6.6 and accepts it since; either way a
// file in RAM must read and write correctly.
TEST(FileIo, FileOnTmpfsRoundTrips) {
  if (!test::fs::is_directory("/dev/shm") || !is_ram_backed("/dev/shm")) {
    GTEST_SKIP() << "/dev/shm is missing or not tmpfs";
  }
  TempDir dir("/dev/shm");
  std::string path = dir.file("data.bin");
  for (uint64_t offset : {0ul, 4096ul, 4100ul}) {
    for (size_t misalign : {size_t{0}, size_t{4}, static_cast<size_t>(offset % kIoAlignment)}) {
      check_round_trip(path, offset, 2 * kIoAlignment, misalign, policy(true));
      if (HasFatalFailure()) return;
    }
  }
}

TEST(FileIo, WritingAReadOnlyFileThrowsAndLeavesItUntouched) {
  TempDir dir;
  std::string path = dir.file("ro.bin");
  std::vector<char> original = pattern(kFileBytes, 3);
  test::write_file_bytes(path, original);
  File file(path, OpenMode::kReadOnly);
  EXPECT_FALSE(file.writable());
  AlignedBuffer buf(kIoAlignment);
  std::memset(buf.data(), 0, buf.size());
  try {
    file.write_at(buf.data(), buf.size(), 0, IoPolicy{});
    ADD_FAILURE() << "write_at on a read-only file did not throw";
  } catch (const ReadOnlyError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_EQ(test::read_file_bytes(path), original);
}

TEST(FileIo, OpeningAMissingFileThrowsNotFoundNamingThePath) {
  TempDir dir;
  std::string path = dir.file("missing.npy");
  try {
    File file(path, OpenMode::kReadOnly);
    ADD_FAILURE() << "opening " << path << " did not throw";
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(FileIo, ReadingPastTheEndThrowsIoError) {
  TempDir dir;
  std::string path = dir.file("short.bin");
  test::write_file_bytes(path, pattern(5000, 1));
  File file(path, OpenMode::kReadOnly);
  std::vector<char> buf(4096);
  EXPECT_THROW(file.read_at(buf.data(), buf.size(), 2000, IoPolicy{}), IoError);
}

TEST(FileIo, CreateExclusiveMakesAPrivateFileAndRefusesAnExistingOne) {
  TempDir dir;
  std::string path = dir.file("private.bin");
  { File file(path, OpenMode::kCreateExclusive); }
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_THROW(File(path, OpenMode::kCreateExclusive), IoError);
}

TEST(FileIo, CreateTruncateEmptiesAnExistingFile) {
  TempDir dir;
  std::string path = dir.file("t.bin");
  test::write_file_bytes(path, pattern(1000, 1));
  File file(path, OpenMode::kCreateTruncate);
  EXPECT_EQ(file.size(), 0u);
  file.resize(12345);
  EXPECT_EQ(file.size(), 12345u);
}

TEST(FileIo, AlignedBufferIsAlignedForODirect) {
  for (size_t n : {1ul, 4096ul, 5000ul}) {
    AlignedBuffer buf(n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % kIoAlignment, 0u);
    EXPECT_EQ(buf.size(), n);
  }
  EXPECT_EQ(AlignedBuffer(0).data(), nullptr);
}

}  // namespace
}  // namespace jask

namespace jask {
namespace {

// A policy reading in `mode`, measured by `calibration`, counted in `counters`.
IoPolicy reading(ReadCalibration& calibration, IoCounters* counters = nullptr) {
  return IoPolicy{true, calibration.mode(), &calibration, counters};
}

// Large reads at an unaligned offset, into memory at the file offset's
// alignment, in every read mode: the same bytes.
TEST(FileIo, LargeReadsMatchInEveryReadModeAndAutoSettles) {
  TempDir dir;
  std::string path = dir.file("large.bin");
  const size_t n = (40u << 20) + 123;  // above the size that calibrates kAuto
  std::vector<char> model = pattern(n + 4096, 5);
  test::write_file_bytes(path, model);
  File file(path, OpenMode::kReadOnly);
  AlignedBuffer buf(n + 2 * kIoAlignment);
  const uint64_t offset = 100;  // the block lands at offset % 4096 in memory, as readers do
  for (ReadMode mode : {ReadMode::kDirect, ReadMode::kBuffered, ReadMode::kAuto}) {
    ReadCalibration calibration(mode);
    // kAuto reads in phases of 128 MiB each way until each has read 256 MiB, then keeps one.
    const int reads = mode == ReadMode::kAuto ? 16 : 1;
    for (int r = 0; r < reads; ++r) {
      std::memset(buf.data(), 0, buf.size());
      file.read_at(buf.data() + offset, n, offset, reading(calibration));
      ASSERT_EQ(std::memcmp(buf.data() + offset, model.data() + offset, n), 0)
          << "mode " << static_cast<int>(mode) << " read " << r;
    }
    if (mode == ReadMode::kAuto)
      EXPECT_NE(calibration.mode(), ReadMode::kAuto);
    else
      EXPECT_EQ(calibration.mode(), mode);
  }
}

TEST(FileIo, AutoTimesWholePhasesOfReadsOneWayAtATime) {
  // Concurrent reads of several operands share the disk, so every read of a
  // 128 MiB phase goes the same way: 4 reads of 40 MiB direct, then buffered.
  TempDir dir;
  std::string path = dir.file("phases.bin");
  const size_t n = 40u << 20;
  test::write_file_bytes(path, pattern(n, 9));
  File file(path, OpenMode::kReadOnly);
  AlignedBuffer buf(n);
  ReadCalibration calibration(ReadMode::kAuto);
  auto read_once = [&] {
    IoCounters counters;
    file.read_at(buf.data(), n, 0, reading(calibration, &counters));
    return std::pair<uint64_t, uint64_t>{counters.direct_bytes, counters.buffered_bytes};
  };
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(read_once(), (std::pair<uint64_t, uint64_t>{n, 0})) << "read " << r;
  for (int r = 4; r < 8; ++r)
    EXPECT_EQ(read_once(), (std::pair<uint64_t, uint64_t>{0, n})) << "read " << r;
  EXPECT_EQ(read_once().first, n) << "third phase: direct again";
}

// Reads of several operands run at once, so a read of one way may end in the
// next phase, of the other way: it counts to neither, and kAuto settles only
// once each way has kCalibrationTotal bytes of closed phases, whose wall
// times it has (counted to its way, such a read let buffered reach the total
// inside a phase whose time was not yet added, and measured twice the disk).
TEST(FileIo, AutoSettlesOnWholePhasesAndAReadEndingInTheOtherWaysPhaseCountsToNeither) {
  ReadCalibration calibration(ReadMode::kAuto);
  const size_t phase = static_cast<size_t>(ReadCalibration::kCalibrationTotal / 2);
  auto begin_two = [&](bool direct) {
    ASSERT_EQ(calibration.begin_read(), direct);
    ASSERT_EQ(calibration.begin_read(), direct);
  };
  begin_two(true);
  calibration.end_read(true, true, phase);  // closes the first direct phase
  calibration.end_read(true, true, phase);  // ends in the buffered phase
  begin_two(false);
  calibration.end_read(false, true, phase);  // closes the first buffered phase
  calibration.end_read(false, true, phase);  // ends in the direct phase
  EXPECT_EQ(calibration.mode(), ReadMode::kAuto);
  ASSERT_TRUE(calibration.begin_read());
  calibration.end_read(true, true, phase);  // direct: two whole phases
  EXPECT_EQ(calibration.mode(), ReadMode::kAuto) << "buffered has one whole phase";
  ASSERT_FALSE(calibration.begin_read());
  calibration.end_read(false, true, phase);  // buffered: two whole phases
  EXPECT_NE(calibration.mode(), ReadMode::kAuto);
}

// A buffer of a huge page or more starts at a multiple of one and is marked
// for transparent huge pages (VmFlags "hg" in /proc/self/smaps), so direct
// reads into it reach the disk in the device's largest requests; a smaller
// one is page-aligned only. Both count their page-rounded bytes.
TEST(AlignedBuffers, FromAHugePageUpAreAlignedToOneAndAskForHugePages) {
  const size_t huge = huge_page_bytes();
  ASSERT_GE(huge, kIoAlignment);
  ASSERT_EQ(huge & (huge - 1), 0u);
  const int64_t before = buffer_bytes();
  {
    AlignedBuffer big(3 * huge + 100), small(huge / 2 + 1);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % huge, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % kIoAlignment, 0u);
    EXPECT_EQ(buffer_bytes() - before,
              static_cast<int64_t>(3 * huge + kIoAlignment + huge / 2 + kIoAlignment));
    std::memset(big.data(), 7, big.size());  // every byte of it is ours
    EXPECT_EQ(big.data()[big.size() - 1], std::byte{7});
    std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
    if (modes.empty() || modes.find("[never]") != std::string::npos) {
      GTEST_SKIP() << "this kernel has no transparent huge pages";
    }
    // The VmFlags of the mapping holding big, and of the one holding small.
    auto flags_at = [](const void* p) {
      std::ifstream smaps("/proc/self/smaps");
      const auto at = reinterpret_cast<uintptr_t>(p);
      bool inside = false;
      for (std::string line; std::getline(smaps, line);) {
        uintptr_t lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) inside = lo <= at && at < hi;
        if (inside && line.rfind("VmFlags:", 0) == 0) return line + " ";
      }
      return std::string();
    };
    EXPECT_NE(flags_at(big.data()).find(" hg "), std::string::npos) << flags_at(big.data());
    EXPECT_EQ(flags_at(small.data()).find(" hg "), std::string::npos) << flags_at(small.data());
  }
  EXPECT_EQ(buffer_bytes(), before);
}

}  // namespace
}  // namespace jask
