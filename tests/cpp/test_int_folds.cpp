// Integer folds are exact: reductions over axes, cumulative reductions,
// argmax / argmin, matmul, scatter-add and put_along_rows of int64 and uint64
// values that differ below a double's precision, and of narrow integers whose
// sums and products wrap to their width, against references in uint64
// arithmetic (wrapping modulo 2^64, then to the dtype's width, as XLA's
// integer arithmetic). Budgets of a few KiB make every call stream many blocks.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "base/dtype.hpp"
#include "kernels/batched_matmul.hpp"
#include "kernels/gather.hpp"
#include "program/reduction.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::BudgetGuard;
using test::ScratchDir;

const DType kIntTypes[] = {DType::i8, DType::u8, DType::i32, DType::u32, DType::i64, DType::u64};

// Values of `dt` as int64 register values (sign- or zero-extended; uint64: their bits).
// 64-bit ones lie within 2^10 of 2^62 or -2^62 (uint64: 2^62 or 2^63): a double rounds
// their differences away, and their sums pass 2^63 and 2^64 many times.
std::vector<int64_t> int_values(DType dt, int64_t n, uint64_t salt) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = (static_cast<uint64_t>(i) + 1 + salt * 7919) * 0x9E3779B97F4A7C15ull;
    const auto small = static_cast<int64_t>((h >> 40) % 2048) - 1024;
    int64_t x = static_cast<int64_t>(h >> 3);
    if (itemsize(dt) == 8) {
      // Added as uint64 (wrapping is defined there) and cast back: 2^63 + small, not an overflow.
      const uint64_t base = (h >> 20) % 2      ? uint64_t{1} << 62
                            : dt == DType::u64 ? uint64_t{1} << 63
                                               : static_cast<uint64_t>(-(int64_t{1} << 62));
      x = static_cast<int64_t>(base + static_cast<uint64_t>(small));
    }
    v[static_cast<size_t>(i)] = wrap_int(dt, x);
  }
  return v;
}

int32_t make_int_array(DType dt, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& values) {
  const size_t isz = itemsize(dt);
  std::vector<unsigned char> bytes(values.size() * isz);
  for (size_t i = 0; i < values.size(); ++i) std::memcpy(&bytes[i * isz], &values[i], isz);
  auto arr = StoredArray::create_scratch(ArrayInfo{dt, shape}, "input");
  arr->write_elems(bytes.data(), 0, static_cast<int64_t>(values.size()));
  return Registry::instance().add(arr);
}

std::vector<int64_t> read_ints(const StoredArray& arr) {
  const DType dt = arr.info().dtype;
  const size_t isz = itemsize(dt);
  std::vector<unsigned char> bytes(arr.info().nbytes());
  arr.read_elems(bytes.data(), 0, arr.info().numel());
  std::vector<int64_t> out(static_cast<size_t>(arr.info().numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t x = 0;
    std::memcpy(&x, &bytes[i * isz], isz);
    out[i] = wrap_int(dt, x);
  }
  return out;
}
std::vector<int64_t> read_ints(int32_t handle) {
  return read_ints(*Registry::instance().get(handle));
}

// The reference fold: sums and products in uint64, max and min as the dtype's signedness.
int64_t fold_ref(const std::string& reduction, DType dt, int64_t acc, int64_t v) {
  const auto a = static_cast<uint64_t>(acc), b = static_cast<uint64_t>(v);
  const bool u = dtype_kind(dt) == DKind::kUnsigned;
  const bool less = u ? a < b : acc < v;
  if (reduction == "sum") return static_cast<int64_t>(a + b);
  if (reduction == "prod") return static_cast<int64_t>(a * b);
  if (reduction == "max") return less ? v : acc;
  return less ? acc : v;  // min
}

const char* const kReductionNames[] = {"sum", "prod", "max", "min"};

Reduction reduction_of(const std::string& name) {
  for (const ReductionRule& r : kReductions)
    if (name == r.name) return r.kind;
  throw std::invalid_argument(name);
}

TEST(IntFolds, ReduceAxesIsExactAndWrapsToTheWidth) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const std::vector<int64_t> shape = {23, 11, 7};
  for (DType dt : kIntTypes) {
    std::vector<int64_t> x = int_values(dt, 23 * 11 * 7, 1);
    const int32_t h = make_int_array(dt, shape, x);
    // axes {1}: accumulated in memory; {1, 2}: trailing runs; {0}: strided outputs
    for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{1}, {1, 2}, {0}}) {
      for (const std::string reduction : kReductionNames) {
        const std::vector<int64_t> got = read_ints(test::array_op(
            "reduce_axes", {h}, {}, {},
            {{"reduction", static_cast<int64_t>(reduction_of(reduction))}, {"axes", axes}}));
        std::vector<int64_t> want;
        std::vector<bool> seen;
        for (int64_t i = 0; i < 23; ++i)
          for (int64_t j = 0; j < 11; ++j)
            for (int64_t k = 0; k < 7; ++k) {
              const int64_t o = axes == std::vector<int64_t>{1}      ? i * 7 + k
                                : axes == std::vector<int64_t>{1, 2} ? i
                                                                     : j * 7 + k;
              if (static_cast<size_t>(o) >= want.size()) {
                want.resize(static_cast<size_t>(o) + 1);
                seen.resize(static_cast<size_t>(o) + 1);
              }
              const int64_t v = x[static_cast<size_t>((i * 11 + j) * 7 + k)];
              want[o] = seen[o] ? fold_ref(reduction, dt, want[o], v) : v;
              seen[o] = true;
            }
        for (int64_t& w : want) w = wrap_int(dt, w);
        ASSERT_EQ(got, want) << reduction << " of " << dtype_name(dt) << " over " << axes.size()
                             << " axes from " << axes[0];
      }
    }
  }
}

TEST(IntFolds, AnEmptyMaxOrMinGivesTheDtypesOwnExtreme) {
  EXPECT_EQ(int_identity(Reduction::kMax, DType::i8), -128);
  EXPECT_EQ(int_identity(Reduction::kMin, DType::i8), 127);
  EXPECT_EQ(int_identity(Reduction::kMin, DType::u8), 255);
  EXPECT_EQ(int_identity(Reduction::kMin, DType::u64), -1);  // 2^64 - 1's bits
  EXPECT_EQ(int_identity(Reduction::kMax, DType::i64), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(int_identity(Reduction::kMin, DType::b8), 1);
}

TEST(IntFolds, CumulativeAndArgReduceAreExact) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const std::vector<int64_t> shape = {37, 5, 3};
  for (DType dt : kIntTypes) {
    const std::vector<int64_t> x = int_values(dt, 37 * 5 * 3, 2);
    const int32_t h = make_int_array(dt, shape, x);
    for (const std::string reduction : kReductionNames) {
      for (bool reverse : {false, true}) {
        const std::vector<int64_t> got = read_ints(
            test::array_op("cumulative", {h}, {}, {},
                           {{"reduction", reduction}, {"axis", int64_t{0}}, {"reverse", reverse}}));
        std::vector<int64_t> want(x.size());
        for (int64_t i = 0; i < 15; ++i) {
          int64_t acc = 0;
          for (int64_t s = 0; s < 37; ++s) {
            const int64_t k = reverse ? 36 - s : s;
            const int64_t v = x[static_cast<size_t>(k * 15 + i)];
            acc = s == 0 ? v : fold_ref(reduction, dt, acc, v);
            want[static_cast<size_t>(k * 15 + i)] = wrap_int(dt, acc);
          }
        }
        ASSERT_EQ(got, want) << "cum" << reduction << " of " << dtype_name(dt)
                             << (reverse ? " reversed" : "");
      }
    }
    for (const std::string reduction : {"max", "min"}) {
      const std::vector<int64_t> got = read_ints(test::array_op(
          "arg_reduce", {h}, {}, {}, {{"reduction", reduction}, {"axis", int64_t{0}}}));
      for (int64_t i = 0; i < 15; ++i) {
        int64_t best = 0;
        for (int64_t k = 1; k < 37; ++k) {
          const int64_t b = x[static_cast<size_t>(best * 15 + i)], v = x[k * 15 + i];
          if (fold_ref(reduction, dt, b, v) != b) best = k;
        }
        ASSERT_EQ(got[static_cast<size_t>(i)], best)
            << "arg" << reduction << " of " << dtype_name(dt);
      }
    }
  }
}

TEST(IntFolds, MatmulIsExactAndWraps) {
  ScratchDir scratch;
  BudgetGuard budget(8192);
  const int64_t M = 19, K = 37, N = 13;
  for (DType dt : kIntTypes) {
    const std::vector<int64_t> a = int_values(dt, M * K, 3), b = int_values(dt, K * N, 4);
    for (bool trans_b : {false, true}) {
      const int32_t ha = make_int_array(dt, {M, K}, a);
      const int32_t hb =
          make_int_array(dt, trans_b ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}, b);
      const std::vector<int64_t> got = read_ints(matmul_arrays(ha, hb, false, trans_b));
      std::vector<int64_t> want(static_cast<size_t>(M * N));
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          uint64_t acc = 0;
          for (int64_t p = 0; p < K; ++p)
            acc += static_cast<uint64_t>(a[i * K + p]) *
                   static_cast<uint64_t>(b[trans_b ? j * K + p : p * N + j]);
          want[static_cast<size_t>(i * N + j)] = wrap_int(dt, static_cast<int64_t>(acc));
        }
      ASSERT_EQ(got, want) << dtype_name(dt) << (trans_b ? " with B^T" : "");
    }
  }
}

TEST(IntFolds, ScatterAddAndPutAlongRowsAreExact) {
  ScratchDir scratch;
  BudgetGuard budget(1024);
  const int64_t rows = 29, row = 6, count = 80;
  std::vector<int32_t> idx(static_cast<size_t>(count));
  for (int64_t e = 0; e < count; ++e) idx[static_cast<size_t>(e)] = (e * 7 + e / 5) % rows;
  for (DType dt : kIntTypes) {
    const std::vector<int64_t> v = int_values(dt, count * row, 5);
    std::vector<int64_t> want(static_cast<size_t>(rows * row), 0);
    for (int64_t e = 0; e < count; ++e)
      for (int64_t c = 0; c < row; ++c) {
        int64_t& w = want[static_cast<size_t>(idx[e] * row + c)];
        w = static_cast<int64_t>(static_cast<uint64_t>(w) + static_cast<uint64_t>(v[e * row + c]));
      }
    for (int64_t& w : want) w = wrap_int(dt, w);
    RowSource on_disk;
    on_disk.array = Registry::instance().get(make_int_array(dt, {count, row}, v));
    RowIndices indices{idx.data(), count, sizeof(int32_t)};
    EXPECT_EQ(read_ints(*scatter_add_rows(ArrayInfo{dt, {rows, row}}, on_disk, indices)), want)
        << "scatter_add_rows of " << dtype_name(dt);

    // put_along_rows: the same sums along the last axis of one row of `count` values
    const int32_t hv = make_int_array(dt, {row, count}, [&] {
      std::vector<int64_t> t(v.size());  // v transposed: row c holds column c's values
      for (int64_t e = 0; e < count; ++e)
        for (int64_t c = 0; c < row; ++c) t[c * count + e] = v[e * row + c];
      return t;
    }());
    std::vector<int64_t> idx2(static_cast<size_t>(row * count));
    for (int64_t c = 0; c < row; ++c)
      for (int64_t e = 0; e < count; ++e) idx2[c * count + e] = idx[static_cast<size_t>(e)];
    const int32_t hi = make_int_array(DType::i32, {row, count}, idx2);
    BudgetGuard row_budget(4096);  // a row of values, indices and sums
    const std::vector<int64_t> put =
        read_ints(test::array_op("put_along_rows", {hv, hi}, {}, {}, {{"length", rows}}));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < row; ++c)
        ASSERT_EQ(put[c * rows + r], want[r * row + c]) << "put_along_rows of " << dtype_name(dt);
  }
}

TEST(IntFolds, ArgsortRanksInt64AndUint64Exactly) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const int64_t rows = 9, n = 41;
  for (DType dt : {DType::i64, DType::u64, DType::i8}) {
    const std::vector<int64_t> x = int_values(dt, rows * n, 6);
    const int32_t h = make_int_array(dt, {rows, n}, x);
    for (bool descending : {false, true}) {
      const std::vector<int64_t> got = read_ints(
          test::array_op("argsort_rows", {h}, {}, {}, {{"descending", descending}, {"keep", n}}));
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<int64_t> want(static_cast<size_t>(n));
        std::iota(want.begin(), want.end(), 0);
        std::stable_sort(want.begin(), want.end(), [&](int64_t i, int64_t j) {
          const int64_t a = x[r * n + i], b = x[r * n + j];
          const bool less = dt == DType::u64 ? uint64_t(a) < uint64_t(b) : a < b;
          const bool more = dt == DType::u64 ? uint64_t(b) < uint64_t(a) : b < a;
          return descending ? more : less;
        });
        const std::vector<int64_t> row(got.begin() + r * n, got.begin() + (r + 1) * n);
        ASSERT_EQ(row, want) << dtype_name(dt) << (descending ? " descending" : "") << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace jask
