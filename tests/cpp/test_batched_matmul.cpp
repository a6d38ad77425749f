// Matrix products with batch axes (batched_matmul.hpp) against a naive
// reference, at budgets of a few KiB so every output matrix runs in many
// tiles with ragged edges.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "exec/pipeline.hpp"
#include "exec/stats.hpp"
#include "kernels/batched_matmul.hpp"
#include "kernels/ops.hpp"
#include "plan/planner.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::array_shape;
using test::array_values;
using test::BudgetGuard;
using test::make_array;
using test::numel_of;
using test::ScratchDir;
using test::test_values;

struct BatchedCase {
  std::vector<int64_t> a_shape, b_shape;  // stored shapes
  bool trans_a, trans_b;
  std::vector<int64_t> out_shape;
};

// Element (r, c) of op(X) for X's `matrix`-th stored matrix (a 1-D operand:
// a row vector on the left, a column on the right).
double element(const std::vector<double>& x, const std::vector<int64_t>& shape, bool left,
               bool trans, int64_t matrix, int64_t r, int64_t c) {
  if (shape.size() == 1) return x[left ? c : r];
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  if (trans) std::swap(r, c);
  return x[matrix * rows * cols + r * cols + c];
}

// The reference: batch indices broadcast by hand, right-aligned.
std::vector<double> reference(const BatchedCase& c, const std::vector<double>& a,
                              const std::vector<double>& b) {
  auto batch_of = [](const std::vector<int64_t>& s) {
    return s.size() <= 2 ? std::vector<int64_t>{} : std::vector<int64_t>(s.begin(), s.end() - 2);
  };
  std::vector<int64_t> ab = batch_of(c.a_shape), bb = batch_of(c.b_shape);
  const size_t nd = std::max(ab.size(), bb.size());
  std::vector<int64_t> ob(nd);
  for (size_t d = 0; d < nd; ++d) {
    int64_t da = d + ab.size() < nd ? 1 : ab[d + ab.size() - nd];
    int64_t db = d + bb.size() < nd ? 1 : bb[d + bb.size() - nd];
    ob[d] = da == 1 ? db : da;
  }
  auto matrix_of = [&](const std::vector<int64_t>& idx, const std::vector<int64_t>& batch) {
    int64_t m = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      m = m * batch[d] + (batch[d] == 1 ? 0 : idx[d + nd - batch.size()]);
    }
    return m;
  };
  const bool a1 = c.a_shape.size() == 1, b1 = c.b_shape.size() == 1;
  const int64_t M = a1 ? 1 : c.a_shape[c.a_shape.size() - (c.trans_a ? 1 : 2)];
  const int64_t K = a1 ? c.a_shape[0] : c.a_shape[c.a_shape.size() - (c.trans_a ? 2 : 1)];
  const int64_t N = b1 ? 1 : c.b_shape[c.b_shape.size() - (c.trans_b ? 2 : 1)];
  std::vector<double> out;
  std::vector<int64_t> idx(nd, 0);
  for (int64_t o = 0; o < numel_of(ob); ++o) {
    for (int64_t rem = o, d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
      idx[d] = rem % ob[d];
      rem /= ob[d];
    }
    const int64_t ma = matrix_of(idx, ab), mb = matrix_of(idx, bb);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += element(a, c.a_shape, true, c.trans_a, ma, i, k) *
               element(b, c.b_shape, false, c.trans_b, mb, k, j);
        out.push_back(s);
      }
  }
  return out;
}

void check_batched(DType dt, const BatchedCase& c) {
  // Entries in [-3, 3] and K <= 28: sums stay exact in every float dtype.
  std::vector<double> a = test_values(numel_of(c.a_shape), 1, 3),
                      b = test_values(numel_of(c.b_shape), 2, 3);
  int32_t out = matmul_arrays(make_array(dt, c.a_shape, a), make_array(dt, c.b_shape, b), c.trans_a,
                              c.trans_b);
  EXPECT_EQ(array_shape(out), c.out_shape);
  EXPECT_EQ(array_values(out), reference(c, a, b))
      << dtype_name(dt) << " out " << c.out_shape.size() << "-D";
}

TEST(BatchedMatmul, BroadcastMapsOutputMatricesToOperandMatrices) {
  BatchBroadcast b({3, 1}, {4}, "mm");
  EXPECT_EQ(b.shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(b.count(), 12);
  for (int64_t o = 0; o < 12; ++o) {
    EXPECT_EQ(b.a_matrix(o), o / 4);
    EXPECT_EQ(b.b_matrix(o), o % 4);
  }
  BatchBroadcast none({}, {}, "mm");
  EXPECT_EQ(none.count(), 1);
  EXPECT_EQ(none.a_matrix(0), 0);
  BatchBroadcast left_only({2, 5}, {}, "mm");
  EXPECT_EQ(left_only.a_matrix(7), 7);
  EXPECT_EQ(left_only.b_matrix(7), 0);
}

TEST(BatchedMatmul, MatchesTheReferenceWithBroadcastBatchesAtATinyBudget) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const uint64_t before = pipeline_tasks_run();
  check_batched(DType::f32, {{3, 1, 37, 23}, {4, 23, 29}, false, false, {3, 4, 37, 29}});
  EXPECT_GE(pipeline_tasks_run() - before, 12u * 8u)
      << "each of the 12 output matrices should run in several tiles";
  check_batched(DType::f32, {{5, 37, 23}, {5, 23, 29}, false, false, {5, 37, 29}});
  check_batched(DType::f32, {{37, 23}, {2, 3, 23, 29}, false, false, {2, 3, 37, 29}});
  check_batched(DType::f32, {{2, 1, 23, 37}, {1, 3, 29, 23}, true, true, {2, 3, 37, 29}});
  check_batched(DType::f64, {{4, 23, 37}, {23, 29}, true, false, {4, 37, 29}});
  check_batched(DType::f16, {{2, 37, 23}, {2, 29, 23}, false, true, {2, 37, 29}});
}

TEST(BatchedMatmul, SmallMatricesGoSeveralToATask) {
  ScratchDir scratch;
  BudgetGuard budget(4096);  // room for about 6 products of 5x4 by 4x3 at a time
  const uint64_t before = pipeline_tasks_run();
  // Operand matrices in every order a group meets: repeating (b), cycling (a),
  // consecutive, and one matrix for all.
  check_batched(DType::f32, {{1, 3, 5, 4}, {4, 1, 4, 3}, false, false, {4, 3, 5, 3}});
  check_batched(DType::f32, {{12, 5, 4}, {12, 4, 3}, false, false, {12, 5, 3}});
  check_batched(DType::f32, {{4, 5}, {12, 4, 3}, true, false, {12, 5, 3}});
  check_batched(DType::f64, {{2, 6, 4, 5}, {6, 3, 4}, true, true, {2, 6, 5, 3}});
  EXPECT_LT(pipeline_tasks_run() - before, 12u * 4u / 2u)
      << "48 products should take far fewer tasks";
}

TEST(BatchedMatmul, OneDimensionalOperandsAreDroppedFromTheResult) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  check_batched(DType::f32, {{23}, {3, 23, 29}, false, false, {3, 29}});
  check_batched(DType::f32, {{3, 37, 23}, {23}, false, false, {3, 37}});
  check_batched(DType::f32, {{2, 1, 23, 37}, {23}, true, false, {2, 1, 37}});
}

TEST(BatchedMatmul, EmptyBatchesAndContractions) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  check_batched(DType::f32, {{0, 5, 4}, {4, 3}, false, false, {0, 5, 3}});
  check_batched(DType::f32, {{2, 5, 0}, {1, 0, 3}, false, false, {2, 5, 3}});  // zeros
}

// A deep contraction whose whole-C plan would read A in short runs: the strip
// plan (K tile by K tile over A's row tiles, all of C in one buffer) gives the
// same exact values, with ragged last row and K tiles. Integer entries in
// [-3, 3]: every partial sum is an integer under 2^24, exact in float32.
TEST(BatchedMatmul, AStripPlanMatchesTheReference) {
  ScratchDir scratch;
  BudgetGuard budget(4 << 20);
  const int64_t M = 61, K = 100003, N = 3;
  const MatmulTiles strip = plan_matmul("mm", M, K, N, 4, 1, /*a_rows_along_k=*/true);
  ASSERT_EQ(strip.strip_rows, M);
  ASSERT_LT(strip.mb, M);
  ASSERT_LT(strip.kb, K);
  ASSERT_GE(strip.kb * 4, 128 << 10);  // A read in runs of 128 KiB
  ASSERT_TRUE(strip.a_in_place);       // A's rows read into its tiles with no copy
  EXPECT_EQ(plan_matmul("mm", M, K, N, 4, 1, false).strip_rows, 0);  // A^T: its runs are long
  const int64_t tasks = ((M + strip.mb - 1) / strip.mb) * ((K + strip.kb - 1) / strip.kb);
  for (DType dt : {DType::f32, DType::f64}) {
    const uint64_t before = pipeline_tasks_run();
    reset_peak_buffer_bytes();
    check_batched(dt, {{M, K}, {K, N}, false, false, {M, N}});
    EXPECT_LE(peak_buffer_bytes(), 4 << 20) << dtype_name(dt);  // the pages around A's rows too
    if (dt == DType::f32) {
      EXPECT_EQ(pipeline_tasks_run() - before, static_cast<uint64_t>(tasks));
    }
  }
  check_batched(DType::f32, {{M, K}, {N, K}, false, true, {M, N}});
  check_batched(DType::f32, {{K, M}, {K, N}, true, false, {M, N}});
}

// A strip plan reads B's K tile k + 1 with the last row tile of K tile k, not
// with the first of k + 1 (whose read with it outlasted a gemm): the first
// task's read is A's tile and B's first K tile, the first task of K tile 1
// reads A's tile alone, and the last row tile of K tile 0 reads B's next tile.
TEST(BatchedMatmul, AStripPlanReadsTheNextTileOfBWithTheLastRowTile) {
  ScratchDir scratch;
  BudgetGuard budget(4 << 20);
  const int64_t M = 61, K = 100003, N = 3;
  const MatmulTiles strip = plan_matmul("mm", M, K, N, 4, 1, /*a_rows_along_k=*/true);
  const int64_t ni = (M + strip.mb - 1) / strip.mb, nk = (K + strip.kb - 1) / strip.kb;
  ASSERT_GE(ni, 2);
  ASSERT_GE(nk, 3);  // K tiles 0 and 1 are whole
  const int32_t a = make_array(DType::f32, {M, K}, test_values(M * K, 1, 3));
  const int32_t b = make_array(DType::f32, {K, N}, test_values(K * N, 2, 3));
  set_timeline(true);
  {
    CallStats call("mm_strip");
    matmul_arrays(a, b, false, false);
  }
  set_timeline(false);
  std::vector<uint64_t> reads;  // one per task, in task order (K tile, row tile)
  for (const StageEvent& e : timeline_events()) {
    if (e.op == "mm_strip" && e.stage == Stage::kRead) reads.push_back(e.bytes);
  }
  ASSERT_EQ(reads.size(), static_cast<size_t>(ni * nk));
  const uint64_t b_tile = static_cast<uint64_t>(strip.kb * N * 4);
  // A's row tile 0 of K tiles 0 and 1 is the same bytes (runs at the same page offsets).
  EXPECT_EQ(reads[0] - reads[ni], b_tile);
  // So is A's last row tile of K tiles 0 and nk - 2, read with B's next tile: K tile 1,
  // whole, and K tile nk - 1, the ragged last.
  const uint64_t b_last = static_cast<uint64_t>((K - (nk - 1) * strip.kb) * N * 4);
  EXPECT_EQ(reads[ni - 1] - reads[(nk - 1) * ni - 1], b_tile - b_last);
}

TEST(BatchedMatmul, RejectsBatchesThatDoNotBroadcastNamingTheShapes) {
  ScratchDir scratch;
  int32_t a = make_array(DType::f32, {3, 4, 5}, test_values(60));
  int32_t b = make_array(DType::f32, {2, 5, 6}, test_values(60));
  try {
    matmul_arrays(a, b, false, false);
    ADD_FAILURE() << "no exception thrown";
  } catch (const ValueError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("float32[3,4,5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("float32[2,5,6]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("do not broadcast"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace jask
