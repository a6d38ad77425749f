// Row gathers and scatter-adds (gather.hpp) against naive in-memory
// references, at the smallest budget (1 KiB) so that every op runs through
// many blocks, with duplicate, negative and out-of-range indices.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "exec/pipeline.hpp"
#include "kernels/gather.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::array_values;
using test::BudgetGuard;
using test::make_array;
using test::ScratchDir;
using test::test_values;

const std::vector<DType> kDTypes = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32};

// Duplicates, runs of adjacent rows, negatives and (clamped) out-of-range rows.
const std::vector<int32_t> kIndices = {5,  6,  7,   5,  0,   -1, 36, 36, 36, 12,
                                       11, 10, -37, 40, -50, 6,  20, 21, 22};

int64_t clamped_row(int64_t i, int64_t rows) {
  return std::clamp<int64_t>(i < 0 ? i + rows : i, 0, rows - 1);
}

RowIndices indices_of(const std::vector<int32_t>& idx) {
  return RowIndices{idx.data(), static_cast<int64_t>(idx.size()), 4};
}

std::vector<double> gathered_reference(const std::vector<double>& x, int64_t rows, int64_t row,
                                       const std::vector<int32_t>& idx) {
  std::vector<double> out;
  for (int32_t i : idx) {
    const int64_t r = clamped_row(i, rows);
    out.insert(out.end(), x.begin() + r * row, x.begin() + (r + 1) * row);
  }
  return out;
}

std::vector<double> scattered_reference(const std::vector<double>& rows_in, int64_t rows,
                                        int64_t row, const std::vector<int32_t>& idx) {
  std::vector<double> out(static_cast<size_t>(rows * row), 0.0);
  for (size_t k = 0; k < idx.size(); ++k) {
    const int64_t r = clamped_row(idx[k], rows);
    for (int64_t j = 0; j < row; ++j) out[r * row + j] += rows_in[k * row + j];
  }
  return out;
}

TEST(Gather, RowsToDiskAndMemoryInManyBlocks) {
  ScratchDir scratch;
  BudgetGuard budget(1024);  // the smallest budget: a few rows per block
  const std::vector<int64_t> shape = {37, 4, 6};
  const int64_t row = 24;
  for (DType dt : kDTypes) {
    const std::vector<double> x = test_values(37 * row, 3);
    ArrayRef xa = Registry::instance().get(make_array(dt, shape, x));
    const std::vector<double> expected = gathered_reference(x, 37, row, kIndices);
    const uint64_t before = pipeline_tasks_run();
    ArrayRef out =
        gather_rows(xa, indices_of(kIndices), {static_cast<int64_t>(kIndices.size()), 4, 6});
    EXPECT_GE(pipeline_tasks_run() - before, 4u) << dtype_name(dt);
    EXPECT_EQ(array_values(*out), expected) << dtype_name(dt);

    std::vector<unsigned char> memory(kIndices.size() * row * itemsize(dt));
    gather_rows_into(xa, indices_of(kIndices), memory.data(), memory.size());
    EXPECT_EQ(test::decode(dt, memory.data(), static_cast<int64_t>(kIndices.size() * row)),
              expected);
  }
}

TEST(Gather, Int64IndicesAndEmptyIndexLists) {
  ScratchDir scratch;
  const std::vector<double> x = test_values(10 * 4, 1);
  ArrayRef xa = Registry::instance().get(make_array(DType::f32, {10, 4}, x));
  const std::vector<int64_t> idx = {9, -10, 3, 3};
  ArrayRef out = gather_rows(xa, RowIndices{idx.data(), 4, 8}, {4, 4});
  EXPECT_EQ(array_values(*out), gathered_reference(x, 10, 4, {9, 0, 3, 3}));
  ArrayRef empty = gather_rows(xa, RowIndices{idx.data(), 0, 8}, {0, 4});
  EXPECT_EQ(empty->info().numel(), 0);
}

TEST(Gather, BudgetBelowOneRowNamesTheBudgetThatWorks) {
  ScratchDir scratch;
  ArrayRef xa = Registry::instance().get(make_array(DType::f32, {4, 300}, test_values(1200)));
  BudgetGuard budget(1024);
  try {
    gather_rows(xa, indices_of({1, 2}), {2, 300});
    ADD_FAILURE() << "no exception thrown";
  } catch (const ValueError& e) {
    EXPECT_EQ(test::needed_budget_in(e.what()), 2 * 2 * 1200) << e.what();
    EXPECT_NE(std::string(e.what()).find("float32[4,300]"), std::string::npos) << e.what();
  }
}

TEST(ScatterAdd, DuplicatesAccumulateFromMemoryAndFromDisk) {
  ScratchDir scratch;
  BudgetGuard budget(1024);
  const int64_t rows = 37, row = 16;
  const ArrayInfo info_f32{DType::f32, {rows, row}};
  for (DType dt : kDTypes) {
    const ArrayInfo info{dt, info_f32.shape};
    const int64_t count = static_cast<int64_t>(kIndices.size());
    const std::vector<double> values = test_values(count * row, 7);
    const std::vector<double> expected = scattered_reference(values, rows, row, kIndices);

    const std::vector<unsigned char> bytes = test::encode(dt, values);
    RowSource in_memory;
    in_memory.memory = bytes.data();
    in_memory.nbytes = bytes.size();
    const uint64_t before = pipeline_tasks_run();
    EXPECT_EQ(array_values(*scatter_add_rows(info, in_memory, indices_of(kIndices))), expected)
        << dtype_name(dt);
    EXPECT_GE(pipeline_tasks_run() - before, 4u) << dtype_name(dt);

    RowSource on_disk;
    on_disk.array = Registry::instance().get(make_array(dt, {count, row}, values));
    EXPECT_EQ(array_values(*scatter_add_rows(info, on_disk, indices_of(kIndices))), expected)
        << dtype_name(dt);
  }
}

TEST(ScatterAdd, OneRowHitManyTimesAndRowsFarApart) {
  ScratchDir scratch;
  BudgetGuard budget(1024);
  // 200 copies of row 3 (more entries than a block holds) and rows far apart,
  // whose gaps are left unwritten.
  std::vector<int32_t> idx(200, 3);
  idx.push_back(99999);
  idx.push_back(50000);
  const int64_t rows = 100000, row = 2;
  const int64_t count = static_cast<int64_t>(idx.size());
  const std::vector<double> values = test_values(count * row, 2);
  const std::vector<unsigned char> bytes = test::encode(DType::f32, values);
  RowSource in_memory;
  in_memory.memory = bytes.data();
  in_memory.nbytes = bytes.size();
  ArrayRef out = scatter_add_rows(ArrayInfo{DType::f32, {rows, row}}, in_memory, indices_of(idx));
  EXPECT_EQ(array_values(*out), scattered_reference(values, rows, row, idx));
}

TEST(ScatterAdd, RowsThatDoNotMatchTheIndicesAreRefused) {
  ScratchDir scratch;
  const std::vector<double> values = test_values(3 * 4);
  RowSource on_disk;
  on_disk.array = Registry::instance().get(make_array(DType::f32, {3, 4}, values));
  EXPECT_THROW(scatter_add_rows(ArrayInfo{DType::f32, {10, 4}}, on_disk, indices_of({1, 2})),
               ValueError);
  EXPECT_THROW(scatter_add_rows(ArrayInfo{DType::f64, {10, 4}}, on_disk, indices_of({1, 2, 3})),
               TypeError);
}

}  // namespace
}  // namespace jask
