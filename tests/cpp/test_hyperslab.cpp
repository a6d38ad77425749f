// Hyperslabs: the contiguous runs of a rectangular sub-block cover exactly
// its elements in C order, and reading or writing a slab touches nothing else.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "storage/hyperslab.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::ScratchDir;

// File positions of a slab's elements in C order, by brute force.
std::vector<int64_t> slab_positions(const std::vector<int64_t>& shape, const Slab& slab) {
  const size_t nd = shape.size();
  std::vector<int64_t> out;
  if (slab.numel() == 0) return out;
  std::vector<int64_t> idx(nd, 0);
  while (true) {
    int64_t pos = 0;
    for (size_t d = 0; d < nd; ++d) pos = pos * shape[d] + slab.start[d] + idx[d];
    out.push_back(pos);
    size_t d = nd;
    while (d-- > 0) {
      if (++idx[d] < slab.extent[d]) break;
      idx[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return out;
  }
}

// Expands the runs for_each_run reports into element positions, checking
// that tile positions advance densely.
std::vector<int64_t> run_positions(const std::vector<int64_t>& shape, const Slab& slab,
                                   int64_t* n_runs) {
  std::vector<int64_t> out;
  *n_runs = 0;
  for_each_run(shape, slab, [&](int64_t file_pos, int64_t tile_pos, int64_t len) {
    EXPECT_EQ(tile_pos, static_cast<int64_t>(out.size()));
    for (int64_t i = 0; i < len; ++i) out.push_back(file_pos + i);
    ++*n_runs;
  });
  return out;
}

TEST(Hyperslab, RunsCoverExactlyTheSlabInCOrder) {
  const std::vector<int64_t> shape = {5, 6, 7};
  const std::vector<Slab> slabs = {
      {{0, 0, 0}, {5, 6, 7}}, {{1, 2, 3}, {2, 3, 4}}, {{4, 5, 6}, {1, 1, 1}},
      {{0, 1, 0}, {5, 4, 7}}, {{2, 0, 0}, {3, 6, 7}}, {{0, 0, 2}, {5, 6, 1}},
  };
  for (const Slab& slab : slabs) {
    int64_t n_runs = 0;
    EXPECT_EQ(run_positions(shape, slab, &n_runs), slab_positions(shape, slab))
        << "start " << testing::PrintToString(slab.start) << " extent "
        << testing::PrintToString(slab.extent);
  }
}

TEST(Hyperslab, TrailingFullAxesMergeIntoOneRun) {
  const std::vector<int64_t> shape = {5, 6, 7};
  int64_t n_runs = 0;
  run_positions(shape, Slab{{1, 0, 0}, {3, 6, 7}}, &n_runs);
  EXPECT_EQ(n_runs, 1) << "rows 1..3 of a C-order array are contiguous";
  run_positions(shape, Slab{{0, 2, 0}, {5, 3, 7}}, &n_runs);
  EXPECT_EQ(n_runs, 5) << "one run per leading index";
  run_positions(shape, Slab{{0, 0, 1}, {5, 6, 5}}, &n_runs);
  EXPECT_EQ(n_runs, 30);
}

TEST(Hyperslab, EmptySlabHasNoRunsAndAScalarHasOne) {
  int64_t n_runs = -1;
  EXPECT_TRUE(run_positions({4, 4}, Slab{{0, 0}, {0, 4}}, &n_runs).empty());
  EXPECT_EQ(n_runs, 0);
  EXPECT_TRUE(run_positions({4, 4}, Slab{{0, 0}, {4, 0}}, &n_runs).empty());
  EXPECT_EQ(n_runs, 0);
  EXPECT_EQ(run_positions({}, Slab{{}, {}}, &n_runs), std::vector<int64_t>{0});
  EXPECT_EQ(n_runs, 1);
}

TEST(Hyperslab, ReadSlabGathersAndWriteSlabScattersOnlyTheSlab) {
  ScratchDir scratch;
  const std::vector<int64_t> shape = {9, 11, 13};
  const int64_t n = test::numel_of(shape);
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<double>(i);
  int32_t h = test::make_array(DType::f32, shape, values);
  ArrayRef arr = Registry::instance().get(h);

  Slab slab{{2, 3, 4}, {5, 6, 7}};
  std::vector<int64_t> positions = slab_positions(shape, slab);
  std::vector<float> tile(slab.numel());
  read_slab(*arr, shape, slab, tile.data());
  for (size_t i = 0; i < positions.size(); ++i) ASSERT_EQ(tile[i], values[positions[i]]) << i;

  for (size_t i = 0; i < tile.size(); ++i) tile[i] = -1.0f - static_cast<float>(i);
  write_slab(*arr, shape, slab, tile.data());
  std::vector<double> expected = values;
  for (size_t i = 0; i < positions.size(); ++i) expected[positions[i]] = tile[i];
  EXPECT_EQ(test::array_values(h), expected);
}

TEST(Hyperslab, ManyShortRunsReadConcurrentlyLandInPlace) {
  // 283 runs of 500 elements: enough for read_slab to spread them over threads.
  ScratchDir scratch;
  const std::vector<int64_t> shape = {300, 1000};
  std::vector<double> values(test::numel_of(shape));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
  int32_t h = test::make_array(DType::f32, shape, values);
  const Slab slab{{7, 13}, {283, 500}};
  std::vector<int64_t> positions = slab_positions(shape, slab);
  std::vector<float> tile(slab.numel(), -1.0f);
  read_slab(*Registry::instance().get(h), shape, slab, tile.data());
  for (size_t i = 0; i < positions.size(); ++i) ASSERT_EQ(tile[i], values[positions[i]]) << i;
}

TEST(Hyperslab, ShortRunsIntoUnalignedMemoryAreReadDirectNotThroughThePageCache) {
  // 64 rows of 3000 of 4096 float32 from column 100: runs of 12000 bytes at file
  // offsets 400 past a row's start, into a tile whose rows fall anywhere. Through
  // the page cache the kernel's readahead around such runs read a capped W3's
  // matrix about twice.
  ScratchDir scratch;
  const std::vector<int64_t> shape = {64, 4096};
  std::vector<double> values(test::numel_of(shape));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i % 100003);
  int32_t h = test::make_array(DType::f32, shape, values);
  ArrayRef arr = Registry::instance().get(h);
  if (!arr->file()->has_direct()) GTEST_SKIP() << "the scratch folder refuses O_DIRECT";
  const Slab slab{{0, 100}, {64, 3000}};
  std::vector<float> tile(slab.numel() + 1, -1.0f);
  const uint64_t direct = io_counters().direct_bytes, buffered = io_counters().buffered_bytes;
  read_slab(*arr, shape, slab, tile.data() + 1);  // +1: no run's memory is at its alignment
  EXPECT_EQ(io_counters().buffered_bytes, buffered);
  EXPECT_GE(io_counters().direct_bytes - direct, static_cast<uint64_t>(slab.numel()) * 4);
  std::vector<int64_t> positions = slab_positions(shape, slab);
  for (size_t i = 0; i < positions.size(); ++i) ASSERT_EQ(tile[i + 1], values[positions[i]]) << i;
}

// Rows 3..42 of a (50, 3001) float32 raw file whose data starts at byte 128,
// columns 17..2516: runs of 10000 bytes whose file offsets step by 12004 bytes
// (3812 mod 4096) from 128 + 36080. Each lands at its file offset's alignment
// with its surrounding pages its own, and is read direct with no copy.
TEST(Hyperslab, StridedRowsReadInPlaceLandAtTheirFileAlignment) {
  test::TempDir dir;
  const std::string path = dir.file("x.raw");
  const std::vector<int64_t> shape = {50, 3001};
  std::vector<double> values(test::numel_of(shape));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i % 100003);
  std::vector<unsigned char> data = test::encode(DType::f32, values);
  std::vector<char> bytes(128, 'h');
  bytes.insert(bytes.end(), data.begin(), data.end());
  test::write_file_bytes(path, bytes);
  ArrayRef arr = test::open_raw(path, ArrayInfo{DType::f32, shape}, 128, false);
  const Slab slab{{3, 17}, {40, 2500}};
  const std::optional<InPlaceLayout> layout = in_place_layout(*arr, shape, slab);
  ASSERT_TRUE(layout.has_value());
  const int64_t run = 2500 * 4, page = static_cast<int64_t>(kIoAlignment);
  EXPECT_GE(layout->pitch, run + 2 * page);
  EXPECT_EQ(layout->pitch % 4, 0);
  EXPECT_LE(layout->bytes, in_place_bytes(40, run));
  for (int64_t r = 0; r < 40; ++r) {
    const int64_t offset = 128 + ((3 + r) * 3001 + 17) * 4;
    ASSERT_EQ((layout->lead + r * layout->pitch) % page, offset % page) << r;
  }
  AlignedBuffer buffer(static_cast<size_t>(layout->bytes));
  std::memset(buffer.data(), 0xab, buffer.size());
  const uint64_t direct = io_counters().direct_bytes, buffered = io_counters().buffered_bytes;
  read_slab_in_place(*arr, shape, slab, *layout, buffer.data());
  if (arr->file()->has_direct()) {
    EXPECT_EQ(io_counters().buffered_bytes, buffered);
    EXPECT_GE(io_counters().direct_bytes - direct, static_cast<uint64_t>(slab.numel()) * 4);
  }
  const std::vector<int64_t> positions = slab_positions(shape, slab);
  for (int64_t r = 0; r < 40; ++r) {
    float row[2500];
    std::memcpy(row, buffer.data() + layout->lead + r * layout->pitch, sizeof row);
    for (int64_t c = 0; c < 2500; ++c)
      ASSERT_EQ(row[c], values[positions[r * 2500 + c]]) << r << ", " << c;
  }
}

TEST(Hyperslab, NoInPlaceLayoutForOneRunOrRunsThatStepUnevenly) {
  ScratchDir scratch;
  const std::vector<int64_t> shape = {2, 5, 1000};
  int32_t h = test::make_array(DType::f32, shape, std::vector<double>(10000, 1.0));
  ArrayRef arr = Registry::instance().get(h);
  EXPECT_FALSE(in_place_layout(*arr, shape, Slab{{0, 1, 0}, {1, 3, 1000}}));  // one run
  // rows 0..2 of both matrices: 4000 bytes apart within one, 12000 across
  EXPECT_FALSE(in_place_layout(*arr, shape, Slab{{0, 0, 0}, {2, 3, 500}}));
  EXPECT_TRUE(in_place_layout(*arr, shape, Slab{{0, 0, 0}, {2, 5, 500}}));  // 4000 apart throughout
}

}  // namespace
}  // namespace jask
