// The kernels along one axis (kernels/scan.cpp, kernels/sort.cpp) through the
// registry, against naive loops over (outer, n, inner). Budgets of a few KiB
// and odd shapes make every call stream many ragged blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::array_values;
using test::BudgetGuard;
using test::expect_error_mentioning;
using test::make_array;
using test::ScratchDir;
using test::test_values;

const std::vector<int64_t> kShape = {13, 29, 7};

struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t at(int64_t o, int64_t k, int64_t i) const { return (o * n + k) * inner + i; }
};

Lines lines_of(const std::vector<int64_t>& shape, int64_t axis) {
  Lines l;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) l.outer *= shape[d];
    if (d > axis) l.inner *= shape[d];
  }
  l.n = shape[axis];
  return l;
}

std::vector<double> cumulative_reference(const std::vector<double>& x, const Lines& l,
                                         const std::string& reduction, bool reverse) {
  std::vector<double> out(x.size());
  for (int64_t o = 0; o < l.outer; ++o) {
    for (int64_t i = 0; i < l.inner; ++i) {
      double acc = 0;
      for (int64_t s = 0; s < l.n; ++s) {
        const int64_t k = reverse ? l.n - 1 - s : s;
        const double v = x[l.at(o, k, i)];
        if (s == 0) {
          acc = v;
        } else if (reduction == "sum") {
          acc += v;
        } else if (reduction == "prod") {
          acc *= v;
        } else if (reduction == "max") {
          acc = std::max(acc, v);
        } else if (reduction == "min") {
          acc = std::min(acc, v);
        } else {
          acc = std::log(std::exp(acc) + std::exp(v));
        }
        out[l.at(o, k, i)] = acc;
      }
    }
  }
  return out;
}

TEST(Scan, CumulativeMatchesItsReferenceOnEveryAxisAndDirection) {
  ScratchDir scratch;
  BudgetGuard budget(8192);  // the carry along axis 0 (29 x 7 doubles) and blocks of ~100
  // products of values in {0.5, 1, 2} are exact in double, as are the sums
  std::vector<double> x = test_values(test::numel_of(kShape), 3, 1);
  for (double& v : x) v = std::exp2(v);
  const int32_t h = make_array(DType::f64, kShape, x);
  for (const std::string reduction : {"sum", "prod", "max", "min", "logsumexp"}) {
    for (int64_t axis = 0; axis < 3; ++axis) {
      for (bool reverse : {false, true}) {
        const std::vector<double> got = array_values(
            test::array_op("cumulative", {h}, {}, {},
                           {{"reduction", reduction}, {"axis", axis}, {"reverse", reverse}}));
        const std::vector<double> want =
            cumulative_reference(x, lines_of(kShape, axis), reduction, reverse);
        for (size_t e = 0; e < want.size(); ++e) {
          ASSERT_NEAR(got[e], want[e], 1e-12 * std::max(1.0, std::fabs(want[e])))
              << reduction << " along axis " << axis << (reverse ? " reversed" : "") << " at " << e;
        }
      }
    }
  }
}

TEST(Scan, CumulativeRejectsUnknownReductionsAndAxes) {
  ScratchDir scratch;
  const int32_t h = make_array(DType::f32, {3, 4}, test_values(12));
  expect_error_mentioning<ValueError>(
      [&] {
        test::array_op("cumulative", {h}, {}, {},
                       {{"reduction", std::string("mean")}, {"axis", 0}, {"reverse", false}});
      },
      {"unknown reduction", "mean"});
  expect_error_mentioning<ValueError>(
      [&] {
        test::array_op("cumulative", {h}, {}, {},
                       {{"reduction", std::string("sum")}, {"axis", 2}, {"reverse", false}});
      },
      {"axis 2", "float32[3,4]"});
}

TEST(Scan, ArgReduceGivesTheFirstExtremumAndTheFirstNan) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  std::vector<double> x = test_values(test::numel_of(kShape), 5, 2);  // many ties
  x[100] = x[999] = x[1000] = std::numeric_limits<double>::quiet_NaN();
  const int32_t h = make_array(DType::f32, kShape, x);
  for (const std::string reduction : {"max", "min"}) {
    for (int64_t axis = 0; axis < 3; ++axis) {
      const Lines l = lines_of(kShape, axis);
      const std::vector<double> got = array_values(
          test::array_op("arg_reduce", {h}, {}, {}, {{"reduction", reduction}, {"axis", axis}}));
      ASSERT_EQ(static_cast<int64_t>(got.size()), l.outer * l.inner);
      for (int64_t o = 0; o < l.outer; ++o) {
        for (int64_t i = 0; i < l.inner; ++i) {
          int64_t best = 0;
          for (int64_t k = 1; k < l.n; ++k) {
            const double b = x[l.at(o, best, i)], v = x[l.at(o, k, i)];
            if (b == b && (v != v || (reduction == "max" ? v > b : v < b))) best = k;
          }
          ASSERT_EQ(got[o * l.inner + i], best) << reduction << " along axis " << axis;
        }
      }
    }
  }
}

TEST(Sort, ArgsortRowsIsStableWithNanLastAndTopKRanksInTotalOrder) {
  ScratchDir scratch;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> row = {2, nan, -0.0, 0.0, -1, 2, -nan, 0.0};
  const int32_t h = make_array(DType::f32, {1, 8}, row);
  const std::vector<double> sorted = array_values(
      test::array_op("argsort_rows", {h}, {}, {}, {{"descending", false}, {"keep", 8}}));
  EXPECT_EQ(sorted, (std::vector<double>{4, 2, 3, 7, 0, 5, 1, 6}));
  const std::vector<double> top = array_values(
      test::array_op("argsort_rows", {h}, {}, {}, {{"descending", true}, {"keep", 5}}));
  EXPECT_EQ(top, (std::vector<double>{1, 0, 5, 3, 7}));
}

TEST(Sort, RowPermutationsAndTheirTransposeOverManyBlocks) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const std::vector<int64_t> shape = {97, 23};
  const int64_t n = 23;
  const std::vector<double> key = test_values(97 * n, 1, 3), y = test_values(97 * n, 2, 9);
  const int32_t hk = make_array(DType::f32, shape, key);
  const int32_t hy = make_array(DType::bf16, shape, y);
  const int32_t order =
      test::array_op("argsort_rows", {hk}, {}, {}, {{"descending", false}, {"keep", n}});
  const std::vector<double> idx = array_values(order);
  const std::vector<double> taken =
      array_values(test::array_op("take_along_rows", {hy, order}, {}, {}, {}));
  const std::vector<double> put =
      array_values(test::array_op("put_along_rows", {hy, order}, {}, {}, {{"length", n}}));
  for (int64_t r = 0; r < 97; ++r) {
    std::vector<int64_t> want(static_cast<size_t>(n));
    std::iota(want.begin(), want.end(), 0);
    std::stable_sort(want.begin(), want.end(),
                     [&](int64_t a, int64_t b) { return key[r * n + a] < key[r * n + b]; });
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_EQ(idx[r * n + j], want[j]) << "row " << r;
      ASSERT_EQ(taken[r * n + j], y[r * n + want[j]]);
      ASSERT_EQ(put[r * n + want[j]], y[r * n + j]);
    }
  }
}

TEST(Sort, PutAlongRowsAddsRepeatedIndices) {
  ScratchDir scratch;
  const int32_t values = make_array(DType::f32, {2, 3}, {1, 2, 4, 8, 16, 32});
  const int32_t indices = make_array(DType::i32, {2, 3}, {0, 0, 2, 1, 1, 1});
  EXPECT_EQ(
      array_values(test::array_op("put_along_rows", {values, indices}, {}, {}, {{"length", 3}})),
      (std::vector<double>{3, 0, 4, 0, 56, 0}));
  const int32_t bad = make_array(DType::i32, {2, 3}, {0, 3, 0, 0, 0, 0});
  expect_error_mentioning<ValueError>(
      [&] {
        test::array_op("take_along_rows", {values, bad}, {}, {}, {});
      },
      {"index 3", "out of range"});
}

TEST(Sort, ARowLargerThanTheBudgetNamesTheBudgetItNeeds) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const int32_t h = make_array(DType::f32, {2, 1000}, test_values(2000));
  expect_error_mentioning<ValueError>(
      [&] {
        test::array_op("argsort_rows", {h}, {}, {}, {{"descending", false}, {"keep", 1000}});
      },
      {"sort(float32[2,1000])", "memory budget of 4096"});
}

}  // namespace
}  // namespace jask
