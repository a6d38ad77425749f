// The readahead of row loops: a read that continues the last one (or starts at
// the first row) starts the next two reads' parts, the reads after take them,
// every value is the file's, a write in between drops the parts, a long read is
// held as parts of up to 8 MiB, and the parts stay within three quarters of
// what the budget leaves, reserved while they are held.
#include <gtest/gtest.h>

#include <algorithm>
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
  expect_rows(*a, 0, 64, model);  // a loop from the first row: rows 64-191 are read behind it
  EXPECT_EQ(d.started(), 2u);
  expect_rows(*a, 64, 64, model);  // served; rows 192-255 are read behind it
  EXPECT_EQ(d.started(), 3u);
  EXPECT_EQ(d.served(), 1u);
  EXPECT_GT(readahead_stats().held_bytes, 64 * kCols * 4);
  EXPECT_EQ(reserved_budget(), readahead_stats().held_bytes) << "the window is reserved";
  for (int64_t first = 128; first + 64 <= kRows; first += 64) expect_rows(*a, first, 64, model);
  EXPECT_EQ(d.served(), static_cast<uint64_t>((kRows - 64) / 64));
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

TEST(Readahead, AReadOverEightMiBIsHeldAsPartsAndServedWhole) {
  ScratchDir scratch;
  BudgetGuard budget(256 << 20);
  Enabled on;
  // 64 rows of 1 MiB + 12 bytes (never page-aligned), read 20 rows at a time:
  // each read is three parts of 6.7 MiB, the last (4 rows) one part.
  constexpr int64_t kBig = 64, kWide = (1 << 18) + 3, kStep = 20;
  ArrayRef a = StoredArray::create_scratch(ArrayInfo{DType::f32, {kBig, kWide}}, "wide");
  std::vector<float> model(static_cast<size_t>(kBig * kWide));
  for (size_t i = 0; i < model.size(); ++i) model[i] = static_cast<float>(i % 100003) - 5.0f;
  a->write_elems(model.data(), 0, kBig * kWide);
  StatsDelta d;
  std::vector<float> rows(static_cast<size_t>(kStep * kWide));
  for (int64_t first = 0; first < kBig; first += kStep) {
    const int64_t n = std::min(kStep, kBig - first) * kWide;
    read_elems_ahead(*a, rows.data(), first * kWide, n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(rows[i], model[first * kWide + i]) << "rows from " << first << ", element " << i;
    EXPECT_LE(readahead_stats().held_bytes, (256 << 20) / 4 * 3);
  }
  EXPECT_EQ(d.served(), 3u);   // the reads from rows 20, 40 and 60
  EXPECT_EQ(d.started(), 7u);  // three parts each of rows 20-39 and 40-59, then rows 60-63
  drop_readahead();
  EXPECT_EQ(reserved_budget(), 0);
}

TEST(Readahead, APartOverThreeQuartersOfTheBudgetIsNotStarted) {
  ScratchDir scratch;
  BudgetGuard budget(64 << 10);  // three quarters: 48 KiB
  Enabled on;
  ArrayRef a = make_table();
  const std::vector<float> model = row_values(0, kRows);
  StatsDelta d;
  for (int64_t first = 0; first < 90; first += 45) expect_rows(*a, first, 45, model);  // 54 KB
  EXPECT_EQ(d.started(), 0u);
  for (int64_t first = 90; first < 130; first += 5) expect_rows(*a, first, 5, model);  // 6 KB
  EXPECT_GE(d.started(), 2u);
  EXPECT_LE(readahead_stats().held_bytes, (64 << 10) / 4 * 3);
  drop_readahead();
}

}  // namespace
}  // namespace jask
