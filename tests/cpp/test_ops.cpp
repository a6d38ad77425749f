// Out-of-core ops through the handle registry, against naive in-memory
// references. Budgets are a few KiB and shapes odd (37x23, 97x61) so every
// op runs through many blocks or tiles with ragged edges. (Elementwise
// programs and full reductions: test_program.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "exec/pipeline.hpp"
#include "formats/npy.hpp"
#include "io/file.hpp"
#include "kernels/batched_matmul.hpp"
#include "kernels/ops.hpp"
#include "plan/planner.hpp"
#include "program/program.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::array_values;
using test::BudgetGuard;
using test::expect_error_mentioning;
using test::make_array;
using test::run_map;
using test::run_map_multi;
using test::run_map_reduce;
using test::ScratchDir;
using test::TaskCount;
using test::test_values;

const std::vector<DType> kAllDTypes = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32};

// x + y, the program Python's encode writes for it.
int32_t add_arrays(int32_t x, int32_t y) {
  test::ProgramBuilder b{.out_shape = test::array_shape(x),
                         .n_operands = 2,
                         .out_dtype = Registry::instance().get(x)->info().dtype};
  b.add(Opcode::kAdd, 0, 1);
  return run_map("add", {x, y}, {}, {}, b.params());
}

TEST(Ops, FillArrayWritesTheValueEverywhere) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  for (DType dt : kAllDTypes) {
    for (double value : {0.0, 2.5, -7.0}) {
      if (dt == DType::i32 && value == 2.5) continue;
      ArrayInfo info{dt, {37, 23}};
      int32_t h = fill_array(info, value);
      EXPECT_EQ(Registry::instance().get(h)->info().shape, info.shape);
      EXPECT_EQ(array_values(h), std::vector<double>(37 * 23, value))
          << dtype_name(dt) << " " << value;
    }
  }
  EXPECT_EQ(array_values(fill_array(ArrayInfo{DType::b8, {5}}, 1.0)), std::vector<double>(5, 1.0));
  // -0.0 is not the zeros of a new file: its sign bit is written.
  float negative_zero = 1.0f;
  Registry::instance()
      .get(fill_array(ArrayInfo{DType::f32, {5}}, -0.0))
      ->read_elems(&negative_zero, 4, 1);
  EXPECT_TRUE(negative_zero == 0.0f && std::signbit(negative_zero));
}

// Brute-force transposition: out index j has in index i with i[perm[d]] = j[d].
std::vector<double> transpose_reference(const std::vector<double>& in,
                                        const std::vector<int64_t>& shape,
                                        const std::vector<int64_t>& perm) {
  const size_t nd = shape.size();
  std::vector<int64_t> out_shape(nd), in_stride(nd);
  for (size_t d = 0; d < nd; ++d) out_shape[d] = shape[perm[d]];
  int64_t s = 1;
  for (size_t d = nd; d-- > 0;) {
    in_stride[d] = s;
    s *= shape[d];
  }
  std::vector<double> out(in.size());
  std::vector<int64_t> j(nd, 0);
  for (size_t flat = 0; flat < in.size(); ++flat) {
    int64_t src = 0;
    for (size_t d = 0; d < nd; ++d) src += j[d] * in_stride[perm[d]];
    out[flat] = in[src];
    for (size_t d = nd; d-- > 0;) {
      if (++j[d] < out_shape[d]) break;
      j[d] = 0;
    }
  }
  return out;
}

void check_transpose(DType dt, const std::vector<int64_t>& shape,
                     const std::vector<int64_t>& perm) {
  // Distinct values per position (within a period), so a misplaced element
  // cannot go unseen. Whole numbers up to 2048 are exact in float16, up to
  // 256 in bfloat16.
  const int64_t period = dt == DType::bf16 ? 201 : 2001;
  std::vector<double> values(static_cast<size_t>(test::numel_of(shape)));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<double>(static_cast<int64_t>(i) % period - period / 2);
  int32_t out = transpose_array(make_array(dt, shape, values), perm);
  std::vector<int64_t> out_shape;
  for (int64_t p : perm) out_shape.push_back(shape[p]);
  EXPECT_EQ(test::array_shape(out), out_shape);
  EXPECT_EQ(array_values(out), transpose_reference(values, shape, perm))
      << dtype_name(dt) << " shape " << testing::PrintToString(shape) << " perm "
      << testing::PrintToString(perm);
}

TEST(Ops, TransposeOf2DArrayMatchesTheReference) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  // 4096 bytes hold about 16x16 float32 tiles: many tiles, ragged at both edges.
  TaskCount tasks;
  check_transpose(DType::f32, {37, 23}, {1, 0});
  EXPECT_GE(tasks.delta(), 4u);
  for (DType dt : kAllDTypes) check_transpose(dt, {37, 23}, {1, 0});
  check_transpose(DType::f32, {37, 23}, {0, 1});
  check_transpose(DType::f32, {1, 100}, {1, 0});
}

TEST(Ops, TransposeOf3DAnd4DArraysMatchesTheReferenceForEveryPermutation) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  for (std::vector<int64_t> perm :
       {std::vector<int64_t>{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}) {
    check_transpose(DType::f32, {13, 7, 11}, perm);
  }
  check_transpose(DType::f64, {3, 4, 5, 6}, {3, 1, 0, 2});
  check_transpose(DType::f16, {3, 4, 5, 6}, {2, 3, 1, 0});
}

TEST(Ops, TransposeRejectsAxesThatAreNotAPermutation) {
  ScratchDir scratch;
  int32_t h = make_array(DType::f32, {2, 3}, test_values(6));
  for (std::vector<int64_t> perm : {std::vector<int64_t>{0}, {0, 0}, {0, 2}, {-1, 0}, {0, 1, 2}}) {
    expect_error_mentioning<ValueError>([&] { transpose_array(h, perm); }, {"float32[2,3]"});
  }
}

// --- matmul ---

struct MatmulCase {
  int64_t m, k, n;
  bool trans_a, trans_b;
};

// Stored form of a logical M x K matrix: its transpose when `trans`.
std::vector<double> stored_matrix(const std::vector<double>& logical, int64_t rows, int64_t cols,
                                  bool trans) {
  if (!trans) return logical;
  std::vector<double> out(logical.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = logical[r * cols + c];
  return out;
}

std::vector<double> matmul_reference(const std::vector<double>& a, const std::vector<double>& b,
                                     int64_t m, int64_t k, int64_t n) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}

void check_matmul(DType dt, const MatmulCase& c) {
  // Entries in [-3, 3]: products summed over K <= 28 stay below 256, exact
  // even in bfloat16.
  std::vector<double> a = test_values(c.m * c.k, 1, 3), b = test_values(c.k * c.n, 2, 3);
  std::vector<int64_t> a_shape =
      c.trans_a ? std::vector<int64_t>{c.k, c.m} : std::vector<int64_t>{c.m, c.k};
  std::vector<int64_t> b_shape =
      c.trans_b ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n};
  int32_t ha = make_array(dt, a_shape, stored_matrix(a, c.m, c.k, c.trans_a));
  int32_t hb = make_array(dt, b_shape, stored_matrix(b, c.k, c.n, c.trans_b));
  int32_t out = matmul_arrays(ha, hb, c.trans_a, c.trans_b);
  EXPECT_EQ(test::array_shape(out), (std::vector<int64_t>{c.m, c.n}));
  EXPECT_EQ(array_values(out), matmul_reference(a, b, c.m, c.k, c.n))
      << dtype_name(dt) << " " << c.m << "x" << c.k << "x" << c.n << " trans_a=" << c.trans_a
      << " trans_b=" << c.trans_b;
}

TEST(Ops, MatmulMatchesTheReferenceForAllTransposeFlags) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  // The budget forces tiles of about 13x13x13: several row, column and K tiles.
  MatmulTiles tiles = plan_matmul("mm", 37, 23, 29, 4);
  ASSERT_LT(tiles.kb, 23);
  ASSERT_LT(tiles.mb, 37);
  TaskCount tasks;
  check_matmul(DType::f32, {37, 23, 29, false, false});
  EXPECT_GE(tasks.delta(), 8u);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) check_matmul(DType::f32, {37, 23, 29, ta, tb});
  }
}

TEST(Ops, MatmulWorksOnEveryDtype) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  for (DType dt : kAllDTypes) {
    check_matmul(dt, {37, 23, 29, false, false});
    check_matmul(dt, {19, 28, 11, true, true});
  }
}

TEST(Ops, MatmulWithALargerBudgetKeepsBResident) {
  ScratchDir scratch;
  // Room for B (9x7) but not for all of A and C (200 rows).
  BudgetGuard budget(16384);
  MatmulTiles tiles = plan_matmul("mm", 200, 9, 7, 8);
  ASSERT_EQ(tiles.kb, 9);
  ASSERT_EQ(tiles.nb, 7);
  ASSERT_LT(tiles.mb, 200) << "A should still be streamed in row panels";
  check_matmul(DType::f32, {200, 9, 7, false, false});
  check_matmul(DType::f64, {200, 9, 7, true, false});
}

TEST(Ops, MatmulOfDegenerateShapes) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  check_matmul(DType::f32, {1, 1, 1, false, false});
  check_matmul(DType::f32, {1, 50, 1, true, true});
  check_matmul(DType::f32, {3, 0, 4, false, false});  // empty contraction: zeros
  check_matmul(DType::f32, {0, 5, 4, false, false});
}

TEST(Ops, MatmulTreatsOneDimensionalOperandsAsRowAndColumnVectors) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const int64_t m = 37, k = 23, n = 29;
  std::vector<double> mat_a = test_values(m * k, 1, 3), mat_b = test_values(k * n, 2, 3);
  std::vector<double> vec_a = test_values(k, 3, 3), vec_b = test_values(k, 4, 3);
  int32_t hA = make_array(DType::f32, {m, k}, mat_a), hB = make_array(DType::f32, {k, n}, mat_b);
  int32_t hva = make_array(DType::f32, {k}, vec_a), hvb = make_array(DType::f32, {k}, vec_b);

  int32_t vm = matmul_arrays(hva, hB, false, false);
  EXPECT_EQ(test::array_shape(vm), (std::vector<int64_t>{n}));
  EXPECT_EQ(array_values(vm), matmul_reference(vec_a, mat_b, 1, k, n));

  int32_t mv = matmul_arrays(hA, hvb, false, false);
  EXPECT_EQ(test::array_shape(mv), (std::vector<int64_t>{m}));
  EXPECT_EQ(array_values(mv), matmul_reference(mat_a, vec_b, m, k, 1));

  int32_t vv = matmul_arrays(hva, hvb, false, false);
  EXPECT_TRUE(test::array_shape(vv).empty());
  EXPECT_EQ(array_values(vv), matmul_reference(vec_a, vec_b, 1, k, 1));

  // The transpose flag of a matrix still applies next to a vector.
  int32_t hAt = make_array(DType::f32, {k, m}, stored_matrix(mat_a, m, k, true));
  EXPECT_EQ(array_values(matmul_arrays(hAt, hvb, true, false)),
            matmul_reference(mat_a, vec_b, m, k, 1));
}

TEST(Ops, MatmulRejectsMismatchedOperandsNamingBoth) {
  ScratchDir scratch;
  int32_t a = make_array(DType::f32, {3, 4}, test_values(12));
  int32_t b = make_array(DType::f32, {5, 2}, test_values(10));
  int32_t c = make_array(DType::f64, {4, 2}, test_values(8));
  int32_t d = make_array(DType::f32, {2, 2, 2}, test_values(8));
  int32_t e = make_array(DType::f32, {4, 2}, test_values(8));
  expect_error_mentioning<ValueError>([&] { matmul_arrays(a, b, false, false); },
                                      {"float32[3,4]", "float32[5,2]"});
  expect_error_mentioning<TypeError>([&] { matmul_arrays(a, c, false, false); },
                                     {"float32[3,4]", "float64[4,2]"});
  expect_error_mentioning<ValueError>([&] { matmul_arrays(a, d, false, false); },
                                      {"float32[2,2,2]"});
  // With trans_a, A is 4x3 and contracts over 3, which B's 4 rows do not match.
  expect_error_mentioning<ValueError>([&] { matmul_arrays(a, e, true, false); },
                                      {"float32[3,4]^T", "float32[4,2]"});
}

// --- whole-array transfers ---

// Every reduction of the table over chosen axes, against its loop reference:
// results kept in memory, streamed along trailing axes, and (large results
// over leading axes) after a transpose. Whole numbers in [-2, 2] (zeros among
// them) keep every reduction exact in any order of folding.
TEST(Ops, ReduceAxesMatchesEveryReductionsReference) {
  ScratchDir scratch;
  BudgetGuard budget(4096);  // results of more than 128 elements are streamed
  EXPECT_EQ(test::reduction_references().size(), std::size(kReductions));
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{37, 23, 3}, {3, 23, 37}}) {
    const std::vector<double> x = test_values(test::numel_of(shape), 3, 2);
    const int32_t h = make_array(DType::f64, shape, x);
    for (const std::vector<int64_t>& axes : {std::vector<int64_t>{0}, {1}, {2}, {0, 2}, {1, 2}}) {
      std::vector<int64_t> out_shape, strides(3, 0);
      for (int64_t d = 2, s = 1; d >= 0; --d) {
        if (std::find(axes.begin(), axes.end(), d) != axes.end()) continue;
        strides[d] = s;
        s *= shape[d];
      }
      for (int64_t d = 0; d < 3; ++d)
        if (std::find(axes.begin(), axes.end(), d) == axes.end()) out_shape.push_back(shape[d]);
      std::vector<std::vector<double>> groups(static_cast<size_t>(test::numel_of(out_shape)));
      for (int64_t i = 0, e = 0; i < shape[0]; ++i)
        for (int64_t j = 0; j < shape[1]; ++j)
          for (int64_t k = 0; k < shape[2]; ++k, ++e)
            groups[i * strides[0] + j * strides[1] + k * strides[2]].push_back(x[e]);
      for (const ReductionRule& rule : kReductions) {
        const std::vector<double> got = array_values(
            test::array_op("reduce_axes", {h}, {}, {},
                           {{"reduction", static_cast<int64_t>(rule.kind)}, {"axes", axes}}));
        ASSERT_EQ(got.size(), groups.size());
        for (size_t o = 0; o < groups.size(); ++o) {
          ASSERT_EQ(got[o], test::reduction_references().at(rule.name)(groups[o]))
              << rule.name << " over " << axes.size() << " axes from axis " << axes[0] << ", shape "
              << shape[0] << "x" << shape[1] << "x" << shape[2] << ", output " << o;
        }
      }
    }
  }
}

TEST(Ops, CopyIntoOverwritesTheDestination) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  std::vector<double> src_values = test_values(37 * 23, 5);
  int32_t dst = fill_array(ArrayInfo{DType::f32, {37, 23}}, -1.0);
  int32_t src = make_array(DType::f32, {37, 23}, src_values);
  copy_into(dst, src);
  EXPECT_EQ(array_values(dst), src_values);
  EXPECT_EQ(array_values(src), src_values);
}

TEST(Ops, CopyIntoAReadOnlyArrayThrowsAndLeavesTheFileUntouched) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  test::TempDir dir;
  std::string path = dir.file("ro.npy");
  {
    auto file = StoredArray::create_file(path, ArrayInfo{DType::f32, {37, 23}});
    file->write_elems(test::encode(DType::f32, test_values(37 * 23, 1)).data(), 0, 37 * 23);
  }
  std::vector<char> before = test::read_file_bytes(path);
  int32_t dst = Registry::instance().add(test::open_npy(path, /*writable=*/false));
  int32_t src = make_array(DType::f32, {37, 23}, test_values(37 * 23, 2));
  expect_error_mentioning<ReadOnlyError>([&] { copy_into(dst, src); }, {path});
  EXPECT_EQ(test::read_file_bytes(path), before);
}

TEST(Ops, CopyIntoRejectsMismatchedLayoutsNamingBoth) {
  ScratchDir scratch;
  int32_t a = make_array(DType::f32, {3, 4}, test_values(12));
  int32_t b = make_array(DType::f32, {4, 3}, test_values(12));
  int32_t c = make_array(DType::i32, {3, 4}, test_values(12));
  expect_error_mentioning<ValueError>([&] { copy_into(a, b); }, {"float32[3,4]", "float32[4,3]"});
  expect_error_mentioning<TypeError>([&] { copy_into(a, c); }, {"float32[3,4]", "int32[3,4]"});
}

TEST(Ops, SaveArrayWritesANpyFileWithTheSameContents) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  test::TempDir dir;
  for (DType dt : kAllDTypes) {
    std::string path = dir.file(std::string("saved-") + dtype_name(dt) + ".npy");
    std::vector<double> values = test_values(37 * 23, 3, 6, dt == DType::i32 ? 0.0 : 0.5);
    save_array(make_array(dt, {37, 23}, values), path);

    std::vector<char> bytes = test::read_file_bytes(path);
    NpyHeader header = parse_npy_header(std::string(bytes.begin(), bytes.end()), path);
    EXPECT_EQ(header.dtype, dt);
    EXPECT_EQ(header.shape, (std::vector<int64_t>{37, 23}));
    ASSERT_EQ(bytes.size(), header.data_offset + 37 * 23 * itemsize(dt));
    EXPECT_EQ(test::decode(dt, bytes.data() + header.data_offset, 37 * 23), values)
        << dtype_name(dt);

    auto reopened = test::open_npy(path, false);
    EXPECT_FALSE(reopened->is_scratch());
    EXPECT_EQ(array_values(*reopened), values);
  }
}

TEST(Ops, WriteFromAndReadToUnalignedMemoryRoundTrip) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  for (DType dt : kAllDTypes) {
    const int64_t n = 97 * 61;
    std::vector<unsigned char> values = test::encode(dt, test_values(n, 4));
    const size_t nbytes = values.size();
    // One byte past an allocation's start: misaligned for every dtype.
    std::vector<unsigned char> src(nbytes + 1), dst(nbytes + 1, 0);
    std::memcpy(src.data() + 1, values.data(), nbytes);

    int32_t h = fill_array(ArrayInfo{dt, {97, 61}}, 0.0);
    write_from_memory(h, src.data() + 1, nbytes);
    EXPECT_EQ(array_values(h), test_values(n, 4)) << dtype_name(dt);
    read_to_memory(h, dst.data() + 1, nbytes);
    EXPECT_EQ(std::memcmp(dst.data() + 1, values.data(), nbytes), 0) << dtype_name(dt);
  }
}

TEST(Ops, MemoryTransfersRejectABufferOfTheWrongSize) {
  ScratchDir scratch;
  int32_t h = fill_array(ArrayInfo{DType::f32, {3, 4}}, 0.0);
  std::vector<float> buf(13);
  expect_error_mentioning<ValueError>([&] { write_from_memory(h, buf.data(), 13 * 4); },
                                      {"float32[3,4]", "52"});
  expect_error_mentioning<ValueError>([&] { read_to_memory(h, buf.data(), 11 * 4); },
                                      {"float32[3,4]", "44"});
}

TEST(Ops, ArraysAtUnalignedFileOffsetsStreamCorrectly) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  test::TempDir dir;
  // A raw file with the array 100 bytes in: no block starts 4096-aligned.
  const int64_t n = 97 * 61;
  std::vector<double> values = test_values(n, 6, 6, 0.5);
  std::vector<unsigned char> payload = test::encode(DType::f32, values);
  std::vector<char> bytes(100 + payload.size(), 'h');
  std::memcpy(bytes.data() + 100, payload.data(), payload.size());
  test::write_file_bytes(dir.file("raw.bin"), bytes);

  int32_t raw = Registry::instance().add(
      test::open_raw(dir.file("raw.bin"), ArrayInfo{DType::f32, {97, 61}}, 100, /*writable=*/true));
  int32_t doubled = add_arrays(raw, raw);
  std::vector<double> expected(values);
  for (double& v : expected) v *= 2;
  EXPECT_EQ(array_values(doubled), expected);

  // And writing back through the unaligned view keeps the bytes before it.
  copy_into(raw, doubled);
  std::vector<char> after = test::read_file_bytes(dir.file("raw.bin"));
  EXPECT_EQ(std::string(after.begin(), after.begin() + 100), std::string(100, 'h'));
  EXPECT_EQ(test::decode(DType::f32, after.data() + 100, n), expected);
}

TEST(Ops, LargeAlignedBlocksGoThroughDirectIo) {
  ScratchDir scratch;
  BudgetGuard budget(1 << 20);
  int32_t a = make_array(DType::f32, {100000}, test_values(100000, 1));
  if (!Registry::instance().get(a)->file()->has_direct())
    GTEST_SKIP() << "scratch refuses O_DIRECT";
  // 1 MiB over 2 slots x 3 streams x 4 bytes: blocks of 40960 elements.
  ASSERT_EQ(plan_stream_block("add", "x", 100000, 12) % 4096, 0);
  uint64_t direct_before = io_counters().direct_bytes;
  int32_t out = add_arrays(a, a);
  EXPECT_GT(io_counters().direct_bytes - direct_before, 100000u * 4);
  std::vector<double> expected = test_values(100000, 1);
  for (double& v : expected) v *= 2;
  EXPECT_EQ(array_values(out), expected);
}

// --- validation ---

// `op` must be refused under the smallest budget, naming the op and its
// operands, and must succeed under the budget the refusal asks for.
template <class Op>
void check_budget_refusal(Op op, const std::vector<std::string>& names) {
  BudgetGuard budget(kMinBudget);
  int64_t needed = -1;
  try {
    op();
    ADD_FAILURE() << "accepted a budget of " << kMinBudget << " bytes";
    return;
  } catch (const ValueError& e) {
    for (const auto& name : names)
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    needed = test::needed_budget_in(e.what());
    EXPECT_GT(needed, kMinBudget) << e.what();
  }
  BudgetGuard raised(needed);
  EXPECT_NO_THROW(op()) << "the budget the error asked for, " << needed << ", is not enough";
}

TEST(Ops, BudgetTooSmallForAnOpIsRefusedNamingTheOpAndTheBudgetNeeded) {
  ScratchDir scratch;
  int32_t a = make_array(DType::f64, {100, 100}, test_values(10000));
  check_budget_refusal([&] { add_arrays(a, a); }, {"add", "float64[100,100]"});
  check_budget_refusal([&] { matmul_arrays(a, a, false, false); }, {"matmul", "float64[100,100]"});
}

// --- the generic entry points used by the FFI handlers ---

TEST(Ops, RegisteredKernelsDecodeFillReshapeAndMatmulCalls) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  using test::array_op;
  const Attrs f64_6x4{{"dtype", int64_t{static_cast<int64_t>(DType::f64)}},
                      {"shape", std::vector<int64_t>{6, 4}}};
  int32_t filled = array_op("fill", {}, {1.5}, {}, f64_6x4);
  EXPECT_EQ(test::array_shape(filled), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(array_values(filled), std::vector<double>(24, 1.5));

  std::vector<double> values = test_values(24, 1);
  int32_t a = make_array(DType::f32, {6, 4}, values);
  int32_t reshaped = array_op("reshape", {a}, {}, {}, {{"shape", std::vector<int64_t>{2, 12}}});
  EXPECT_EQ(test::array_shape(reshaped), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(array_values(reshaped), values);
  EXPECT_THROW(array_op("reshape", {a}, {}, {}, {{"shape", std::vector<int64_t>{5, 5}}}),
               ValueError);

  // A^T A through the flags: (4x6)(6x4).
  int32_t gram = array_op("matmul", {a, a}, {}, {}, {{"trans_a", true}, {"trans_b", false}});
  std::vector<double> at = stored_matrix(values, 6, 4, true);
  EXPECT_EQ(array_values(gram), matmul_reference(at, values, 4, 6, 4));

  // Elementwise programs: the map, map_multi and map_reduce kernels, labelled for messages.
  test::ProgramBuilder scale{.out_shape = {6, 4}, .n_operands = 2};
  scale.add(Opcode::kMul, 0, 1);
  int32_t scaled = test::run_map("scale", {a}, {}, {-2.0}, scale.params());
  std::vector<double> expected(values);
  for (double& v : expected) v *= -2.0;
  EXPECT_EQ(array_values(scaled), expected);
  scale.outputs = {scale.code.back().dst, 0};
  std::vector<int32_t> both = test::run_map_multi("scale", {a}, {}, {-2.0}, scale.params());
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(array_values(both[0]), expected);
  EXPECT_EQ(array_values(both[1]), values);
  test::ProgramBuilder sum{.out_shape = {6, 4}, .n_operands = 1, .reduction = Reduction::kSum};
  sum.add(Opcode::kCopy, 0);
  EXPECT_DOUBLE_EQ(test::run_map_reduce("sum", {a}, {}, {}, sum.params()),
                   std::accumulate(values.begin(), values.end(), 0.0));

  // The single-op kernels of the old elementwise path, and the "map/" prefixes, are gone.
  for (const char* old : {"add", "sub", "mul", "neg", "square", "scale", "add_scalar",
                          "rsub_scalar", "copy", "map/scale"}) {
    expect_error_mentioning<ValueError>(
        [&] {
          array_op(old, {a, a}, {1.0}, {}, {});
        },
        {"unknown", old});
  }
  for (const char* old : {"sum", "sum_mul", "max", "map_reduce/sum"}) {
    expect_error_mentioning<ValueError>(
        [&] { test::run_call(ResultKind::kScalar, old, {a}, {}, {}, {}); }, {"unknown", old});
  }
  EXPECT_THROW(array_op("frobnicate", {a}, {}, {}, {}), ValueError);
  expect_error_mentioning<ValueError>(
      [&] { test::run_call(ResultKind::kArrays, "fill", {}, {1.0}, {}, f64_6x4); },
      {"unknown arrays kernel 'fill'", "array"});
  EXPECT_THROW(
      array_op("fill", {}, {1.0}, {}, {{"dtype", int64_t{99}}, {"shape", std::vector<int64_t>{3}}}),
      TypeError);
}

}  // namespace
}  // namespace jask
