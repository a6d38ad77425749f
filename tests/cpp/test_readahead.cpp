// The readahead of row loops: a read that continues the last one starts the
// next two windows, the reads after take them, every value is the file's, a write
// in between drops the window, and the window stays within half of the
// budget, reserved while it is held.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "base/memory_budget.hpp"
#include "call/registry.hpp"
#include "storage/array_store.hpp"
#include "storage/readahead.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::BudgetGuard;
using test::ScratchDir;

constexpr int64_t kRows = 1000, kCols = 300;  // rows of 1200 bytes: never page-aligned

std::vector<float> row_values(int64_t first, int64_t rows) {
  std::vector<float> v(static_cast<size_t>(rows * kCols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(first * kCols + i) * 0.5f;
  return v;
}

ArrayRef make_table() {
  ArrayRef a = StoredArray::create_scratch(ArrayInfo{DType::f32, {kRows, kCols}}, "table");
  const std::vector<float> all = row_values(0, kRows);
  a->write_elems(all.data(), 0, kRows * kCols);
  return a;
}

// Rows [first, first + rows) through the readahead, checked against the model.
void expect_rows(const StoredArray& a, int64_t first, int64_t rows,
                 const std::vector<float>& model) {
  std::vector<float> got(static_cast<size_t>(rows * kCols));
  read_elems_ahead(a, got.data(), first * kCols, rows * kCols);
  for (int64_t i = 0; i < rows * kCols; ++i)
    ASSERT_EQ(got[i], model[first * kCols + i]) << "rows from " << first << ", element " << i;
}

// The tests turn the readahead on for their own reads.
struct Enabled {
  Enabled() { set_readahead_enabled(true); }
  ~Enabled() { set_readahead_enabled(false); }
};

struct StatsDelta {
  ReadaheadStats before = readahead_stats();
  uint64_t started() const { return readahead_stats().started - before.started; }
  uint64_t served() const { return readahead_stats().served - before.served; }
  uint64_t dropped() const { return readahead_stats().dropped - before.dropped; }
};

TEST(Readahead, AReadContinuingTheLastOneIsServedFromTheWindow) {
  ScratchDir scratch;
  BudgetGuard budget(16 << 20);
  Enabled on;
  ArrayRef a = make_table();
  const std::vector<float> model = row_values(0, kRows);
  StatsDelta d;
  expect_rows(*a, 0, 64, model);  // nothing to continue yet
  EXPECT_EQ(d.started(), 0u);
  expect_rows(*a, 64, 64, model);  // continues: rows 128-255 are read behind it
  EXPECT_EQ(d.started(), 2u);
  EXPECT_GT(readahead_stats().held_bytes, 64 * kCols * 4);
  EXPECT_EQ(reserved_budget(), readahead_stats().held_bytes) << "the window is reserved";
  for (int64_t first = 128; first + 64 <= kRows; first += 64) expect_rows(*a, first, 64, model);
  EXPECT_EQ(d.served(), static_cast<uint64_t>((kRows - 128) / 64));
  // The last window would start past the array's data: it is cut there.
  expect_rows(*a, kRows - kRows % 64, kRows % 64, model);
  drop_readahead();
  EXPECT_EQ(reserved_budget(), 0);
  EXPECT_EQ(readahead_stats().held_bytes, 0);
}

TEST(Readahead, AWriteBetweenTwoReadsDropsTheWindowAndTheNewBytesAreRead) {
  ScratchDir scratch;
  BudgetGuard budget(16 << 20);
  Enabled on;
  ArrayRef a = make_table();
  std::vector<float> model = row_values(0, kRows);
  expect_rows(*a, 0, 50, model);
  expect_rows(*a, 50, 50, model);  // the windows hold rows 100-199
  StatsDelta d;
  std::vector<float> fresh(static_cast<size_t>(kCols), -7.0f);
  a->write_elems(fresh.data(), 120 * kCols, kCols);  // row 120 changes
  std::copy(fresh.begin(), fresh.end(), model.begin() + 120 * kCols);
  expect_rows(*a, 100, 50, model);
  EXPECT_EQ(d.served(), 0u);
  EXPECT_EQ(d.dropped(), 2u);
  expect_rows(*a, 150, 50, model);  // the loop goes on with a new window
  EXPECT_EQ(d.served(), 1u);
  drop_readahead();
}

TEST(Readahead, OtherReadsAndOtherArraysDropTheWindow) {
  ScratchDir scratch;
  BudgetGuard budget(16 << 20);
  Enabled on;
  ArrayRef a = make_table(), b = make_table();
  const std::vector<float> model = row_values(0, kRows);
  expect_rows(*a, 0, 10, model);
  expect_rows(*a, 10, 10, model);
  StatsDelta d;
  expect_rows(*a, 500, 10, model);  // a jump: not the window's rows
  expect_rows(*a, 510, 10, model);  // continues again
  expect_rows(*b, 520, 10, model);  // another file
  EXPECT_EQ(d.served(), 0u);
  EXPECT_EQ(d.dropped(), 4u);  // two windows each time
  drop_readahead();
  EXPECT_EQ(reserved_budget(), 0);
}

TEST(Readahead, AWindowOverHalfTheBudgetIsNotStarted) {
  ScratchDir scratch;
  BudgetGuard budget(64 << 10);  // a half: 32 KiB
  Enabled on;
  ArrayRef a = make_table();
  const std::vector<float> model = row_values(0, kRows);
  StatsDelta d;
  for (int64_t first = 0; first < 90; first += 30) expect_rows(*a, first, 30, model);  // 36 KB
  EXPECT_EQ(d.started(), 0u);
  for (int64_t first = 90; first < 130; first += 5) expect_rows(*a, first, 5, model);  // 6 KB
  EXPECT_GE(d.started(), 2u);
  EXPECT_LE(readahead_stats().held_bytes, (64 << 10) / 2);
  drop_readahead();
}

}  // namespace
}  // namespace jask
