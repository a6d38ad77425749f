// Slices (views and streamed copies) and placements (the slice's backward
// rule, concatenation) against brute-force references, at budgets of a few
// KiB so that every op runs through many blocks with ragged edges.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "exec/pipeline.hpp"
#include "io/file.hpp"
#include "kernels/ops.hpp"
#include "kernels/slicing.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::array_values;
using test::BudgetGuard;
using test::make_array;
using test::ScratchDir;

// Distinct values per position within a period, so a misplaced element
// shows: whole numbers up to 1000 are exact in float16, up to 128 in bfloat16.
std::vector<double> distinct_values(int64_t n, DType dt = DType::f32) {
  const int64_t period = dt == DType::bf16 ? 201 : 2001;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i % period - period / 2);
  return v;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// Calls fn(position in the array, position in the selection) for every selected element.
template <class Fn>
void for_each_selected(const std::vector<int64_t>& shape, const Selection& sel, Fn fn) {
  const std::vector<int64_t> stride = strides_of(shape), counts = selected_shape(sel);
  const int64_t n = test::numel_of(counts);
  std::vector<int64_t> idx(sel.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t pos = 0;
    for (size_t d = 0; d < sel.size(); ++d)
      pos += (sel[d].start + sel[d].step * idx[d]) * stride[d];
    fn(pos, k);
    for (size_t d = sel.size(); d-- > 0;) {
      if (++idx[d] < counts[d]) break;
      idx[d] = 0;
    }
  }
}

std::vector<double> slice_reference(const std::vector<double>& x, const std::vector<int64_t>& shape,
                                    const Selection& sel) {
  std::vector<double> out(static_cast<size_t>(test::numel_of(selected_shape(sel))));
  for_each_selected(shape, sel, [&](int64_t pos, int64_t k) { out[k] = x[pos]; });
  return out;
}

void check_slice(DType dt, const std::vector<int64_t>& shape, const Selection& sel, bool view) {
  const std::vector<double> values = distinct_values(test::numel_of(shape), dt);
  ArrayRef x = Registry::instance().get(make_array(dt, shape, values));
  const std::string what = std::string(dtype_name(dt)) + " " + testing::PrintToString(shape);
  ArrayRef out = slice_array(x, sel);
  EXPECT_EQ(out->info().shape, selected_shape(sel)) << what;
  EXPECT_EQ(out->path() == x->path(), view)
      << what << (view ? ": expected a view" : ": expected a copy");
  const std::vector<double> expected = slice_reference(values, shape, sel);
  EXPECT_EQ(array_values(*out), expected) << what;
  // The same into memory.
  std::vector<unsigned char> bytes(out->info().nbytes());
  slice_into(x, sel, bytes.data(), bytes.size());
  EXPECT_EQ(test::decode(dt, bytes.data(), out->info().numel()), expected)
      << what << " (into memory)";
}

TEST(Slicing, StridedAndNegativeStepSlicesCopy) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  {
    const uint64_t before = pipeline_tasks_run();
    check_slice(DType::f32, {97, 61}, {{3, 2, 40}, {10, 1, 51}}, false);  // x[3:83:2, 10:]
    EXPECT_GT(pipeline_tasks_run() - before, 5u);                         // many blocks
  }
  check_slice(DType::f32, {97, 61}, {{0, 1, 97}, {5, 1, 1}}, false);                // x[:, 5:6]
  check_slice(DType::f32, {97, 61}, {{96, -3, 33}, {60, -1, 61}}, false);           // x[::-3, ::-1]
  check_slice(DType::f32, {97, 61}, {{0, 1, 97}, {1, 7, 9}}, false);                // x[:, 1::7]
  check_slice(DType::f32, {13, 7, 11}, {{5, 1, 1}, {0, 1, 7}, {1, 1, 3}}, false);   // x[5, :, 1:4]
  check_slice(DType::f32, {13, 7, 11}, {{0, 1, 13}, {0, 1, 7}, {2, 3, 3}}, false);  // x[..., 2:9:3]
  check_slice(DType::f32, {2, 3000}, {{0, 1, 2}, {0, 1500, 2}}, false);  // far-apart elements
  check_slice(DType::f32, {4, 5000}, {{0, 1, 4}, {4999, -2, 2500}},
              false);  // runs longer than the scratch
  for (DType dt : {DType::f64, DType::f16, DType::bf16, DType::i32}) {
    check_slice(dt, {37, 23}, {{1, 4, 9}, {22, -5, 5}}, false);
  }
}

TEST(Slicing, ContiguousSelectionsAreViews) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const uint64_t before = pipeline_tasks_run();
  check_slice(DType::f32, {97, 61}, {{3, 1, 40}, {0, 1, 61}}, true);               // x[3:43]
  check_slice(DType::f32, {13, 7, 11}, {{5, 1, 1}, {2, 1, 1}, {1, 1, 9}}, true);   // x[5, 2, 1:10]
  check_slice(DType::f32, {13, 7, 11}, {{5, 1, 1}, {2, 1, 4}, {0, 1, 11}}, true);  // x[5, 2:6]
  check_slice(DType::bf16, {37, 23}, {{36, 1, 1}, {0, 1, 23}}, true);              // x[-1]
  EXPECT_EQ(pipeline_tasks_run() - before, 0u) << "a view streams nothing";
}

TEST(Slicing, ViewsAtUnalignedOffsetsStillReadDirect) {
  ScratchDir scratch;
  // Blocks of many pages: only their first and last pages are read buffered.
  BudgetGuard budget(256 << 10);
  const std::vector<int64_t> shape = {20000, 5};
  const std::vector<double> values = test::test_values(100000, 3);
  ArrayRef x = Registry::instance().get(make_array(DType::f32, shape, values));
  ArrayRef view = slice_array(x, {{1, 1, 19998}, {0, 1, 5}});  // 20 bytes into the data
  EXPECT_EQ(view->data_offset() % kIoAlignment, (x->data_offset() + 20) % kIoAlignment);
  std::vector<float> got(static_cast<size_t>(view->info().numel()));
  const uint64_t direct_before = io_counters().direct_bytes;
  read_to_memory(Registry::instance().add(view), got.data(), got.size() * sizeof(float));
  if (x->file()->has_direct()) {
    EXPECT_GT(io_counters().direct_bytes - direct_before, 300000u);
  }
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], values[i + 5]) << i;
}

TEST(Slicing, EmptyAndZeroDimensionalSelections) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  check_slice(DType::f32, {13, 7}, {{4, 1, 0}, {0, 1, 7}}, false);
  check_slice(DType::f32, {}, {}, true);
}

TEST(Slicing, OutOfBoundsSelectionsNameTheAxis) {
  ScratchDir scratch;
  ArrayRef x = Registry::instance().get(make_array(DType::f32, {13, 7}, distinct_values(91)));
  try {
    slice_array(x, {{0, 1, 13}, {2, 3, 3}});  // 2, 5, 8: 8 is past 7
    ADD_FAILURE() << "no exception";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("index 8 is out of bounds for axis 1 with size 7"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(slice_array(x, {{0, 1, 13}}), ValueError);  // one axis missing
}

// zeros(shape) with each part's values at its selection.
std::vector<double> place_reference(const std::vector<int64_t>& shape,
                                    const std::vector<Selection>& sels,
                                    const std::vector<std::vector<double>>& values) {
  std::vector<double> out(static_cast<size_t>(test::numel_of(shape)), 0.0);
  for (size_t k = 0; k < sels.size(); ++k) {
    for_each_selected(shape, sels[k], [&](int64_t pos, int64_t j) { out[pos] = values[k][j]; });
  }
  return out;
}

TEST(Slicing, PlaceWritesValuesIntoZeros) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const std::vector<int64_t> shape = {97, 61};
  for (const Selection& sel :
       {Selection{{3, 2, 40}, {10, 1, 51}}, Selection{{0, 1, 97}, {5, 1, 1}},
        Selection{{4, 1, 30}, {0, 1, 61}}, Selection{{1, 5, 19}, {2, 7, 8}}}) {
    const std::vector<double> values =
        test::test_values(test::numel_of(selected_shape(sel)), 4, 6, 0.5);
    const std::vector<double> expected = place_reference(shape, {sel}, {values});
    // values on disk
    Placement disk{Registry::instance().get(make_array(DType::f32, selected_shape(sel), values)),
                   nullptr, sel};
    EXPECT_EQ(array_values(*place_arrays({DType::f32, shape}, {disk})), expected);
    // values in memory
    const std::vector<unsigned char> bytes = test::encode(DType::f32, values);
    Placement memory{nullptr, bytes.data(), sel};
    EXPECT_EQ(array_values(*place_arrays({DType::f32, shape}, {memory})), expected);
  }
}

TEST(Slicing, PlaceOfASmallSliceWritesOnlyItsBlocks) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const Selection sel = {{500, 1, 2}, {0, 1, 61}};
  const std::vector<double> values = test::test_values(122, 5, 6, 0.5);
  const std::vector<unsigned char> bytes = test::encode(DType::f32, values);
  ArrayRef out = place_arrays({DType::f32, {1000, 61}}, {Placement{nullptr, bytes.data(), sel}});
  EXPECT_EQ(array_values(*out), place_reference({1000, 61}, {sel}, {values}));
  // The rest stays a hole in the sparse file (on file systems with holes).
  struct stat st {};
  ASSERT_EQ(::stat(out->path().c_str(), &st), 0);
  EXPECT_LT(static_cast<int64_t>(st.st_blocks) * 512, 1000 * 61 * 4 / 2);
}

TEST(Slicing, ConcatenationIsAPlacementOfEveryPart) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  // (37, 5) ++ (37, 11) in memory ++ (37, 2) along axis 1.
  const std::vector<int64_t> widths = {5, 11, 2}, shape = {37, 18};
  std::vector<Selection> sels;
  std::vector<std::vector<double>> values;
  std::vector<std::vector<unsigned char>> memory;
  std::vector<Placement> parts;
  int64_t offset = 0;
  for (size_t k = 0; k < widths.size(); ++k) {
    sels.push_back({{0, 1, 37}, {offset, 1, widths[k]}});
    offset += widths[k];
    values.push_back(test::test_values(37 * widths[k], static_cast<int>(k), 6, 0.5));
    if (k == 1) {
      memory.push_back(test::encode(DType::f32, values.back()));
      parts.push_back({nullptr, memory.back().data(), sels.back()});
    } else {
      parts.push_back(
          {Registry::instance().get(make_array(DType::f32, {37, widths[k]}, values.back())),
           nullptr, sels.back()});
    }
  }
  const uint64_t before = pipeline_tasks_run();
  EXPECT_EQ(array_values(*place_arrays({DType::f32, shape}, parts)),
            place_reference(shape, sels, values));
  EXPECT_GT(pipeline_tasks_run() - before, 2u);
  // Along axis 0: each part one range of the output.
  const Selection top = {{0, 1, 20}, {0, 1, 7}}, bottom = {{20, 1, 17}, {0, 1, 7}};
  const std::vector<double> a = test::test_values(140, 1), b = test::test_values(119, 2);
  Placement pa{Registry::instance().get(make_array(DType::f64, {20, 7}, a)), nullptr, top};
  Placement pb{Registry::instance().get(make_array(DType::f64, {17, 7}, b)), nullptr, bottom};
  EXPECT_EQ(array_values(*place_arrays({DType::f64, {37, 7}}, {pa, pb})),
            place_reference({37, 7}, {top, bottom}, {a, b}));
}

TEST(Slicing, PlaceRejectsOverflowingOverlapsAndNegativeSteps) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const std::vector<unsigned char> bytes(4 * 10 * 7, 0);
  // Overlaps that would overflow a block's buffer are caught.
  const Selection rows = {{0, 1, 10}, {0, 1, 7}};
  EXPECT_THROW(place_arrays({DType::f32, {10, 7}},
                            {{nullptr, bytes.data(), rows}, {nullptr, bytes.data(), rows}}),
               ValueError);
  EXPECT_THROW(
      place_arrays({DType::f32, {20, 7}}, {{nullptr, bytes.data(), {{9, -1, 10}, {0, 1, 7}}}}),
      ValueError);
}

TEST(Slicing, PlaceOverAFillValueOrABaseArray) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const std::vector<int64_t> shape = {97, 61};
  const Selection sel = {{3, 2, 40}, {10, 1, 51}};
  const std::vector<double> values = test::test_values(40 * 51, 4, 6, 0.5);
  ArrayRef part = Registry::instance().get(make_array(DType::f32, selected_shape(sel), values));
  // a fill value (lax.pad): every element the part leaves
  std::vector<double> expected = place_reference(shape, {sel}, {values});
  std::vector<double> filled = expected,
                      mask =
                          place_reference(shape, {sel}, {std::vector<double>(values.size(), 1.0)});
  for (size_t i = 0; i < filled.size(); ++i)
    if (mask[i] == 0.0) filled[i] = -2.5;
  Background fill;
  fill.fill = -2.5;
  EXPECT_EQ(array_values(*place_arrays({DType::f32, shape}, {{part, nullptr, sel}}, fill)), filled);
  // a base array (dynamic_update_slice): its elements where the part does not land
  const std::vector<double> base_values = distinct_values(97 * 61);
  Background base;
  base.base = Registry::instance().get(make_array(DType::f32, shape, base_values));
  std::vector<double> updated = base_values;
  for (size_t i = 0; i < updated.size(); ++i)
    if (mask[i] != 0.0) updated[i] = expected[i];
  EXPECT_EQ(array_values(*place_arrays({DType::f32, shape}, {{part, nullptr, sel}}, base)),
            updated);
  // a base of another shape is refused
  Background wrong;
  wrong.base = Registry::instance().get(make_array(DType::f32, {97, 60}, distinct_values(97 * 60)));
  test::expect_error_mentioning<ValueError>(
      [&] {
        place_arrays({DType::f32, shape}, {{part, nullptr, sel}}, wrong);
      },
      {"base", "float32[97,60]"});
}

TEST(Slicing, DynamicStartsAreClampedIntoTheArray) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  using Ints = std::vector<int64_t>;
  const std::vector<double> values = distinct_values(53 * 29);
  int32_t x = make_array(DType::f32, {53, 29}, values);
  // starts (50, -3) for a (10, 5) window clamp to (43, 0), as XLA's dynamic_slice
  const Attrs sizes{{"count", Ints{10, 5}}};
  int32_t out = test::array_op("dynamic_slice", {x}, {50.0, -3.0}, {}, sizes);
  EXPECT_EQ(array_values(out), slice_reference(values, {53, 29}, {{43, 1, 10}, {0, 1, 5}}));
  // dynamic_update_slice: the window written over x at the clamped starts
  const std::vector<double> update(50, 7.0);
  const Attrs place{{"dtype", int64_t{static_cast<int64_t>(DType::f32)}},
                    {"shape", Ints{53, 29}},
                    {"in_memory", Ints{0}},
                    {"start", Ints{0, 0}},
                    {"step", Ints{1, 1}},
                    {"count", Ints{10, 5}},
                    {"base", true},
                    {"fill", false},
                    {"dynamic", true}};
  int32_t window = make_array(DType::f32, {10, 5}, update);
  std::vector<double> expected = values;
  for_each_selected({53, 29}, {{43, 1, 10}, {24, 1, 5}},
                    [&](int64_t pos, int64_t) { expected[pos] = 7.0; });
  EXPECT_EQ(array_values(test::array_op("place", {x, window}, {60.0, 24.0}, {}, place)), expected);
  // one start per axis
  test::expect_error_mentioning<ValueError>(
      [&] { test::array_op("dynamic_slice", {x}, {1.0}, {}, sizes); }, {"dynamic_slice"});
}

TEST(Slicing, KernelsDecodeTheirTypedCalls) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const std::vector<double> values = distinct_values(13 * 7);
  int32_t x = make_array(DType::f32, {13, 7}, values);
  using Ints = std::vector<int64_t>;
  // x[1:13:3, 6::-2]
  const Attrs slice{{"start", Ints{1, 6}}, {"step", Ints{3, -2}}, {"count", Ints{4, 3}}};
  const Selection sel = {{1, 3, 4}, {6, -2, 3}};
  int32_t out = test::array_op("slice", {x}, {}, {}, slice);
  EXPECT_EQ(array_values(out), slice_reference(values, {13, 7}, sel));
  std::vector<float> in_memory(12);
  KernelCall to_memory;
  to_memory.kernel = "slice";
  to_memory.operands.handles = {x};
  to_memory.attrs = slice;
  to_memory.out = MemoryResult{in_memory.data(), in_memory.size() * sizeof(float)};
  run_kernel(ResultKind::kInMemory, to_memory);
  EXPECT_EQ(std::vector<double>(in_memory.begin(), in_memory.end()),
            slice_reference(values, {13, 7}, sel));
  // place: the slice back into zeros of (13, 7), positive steps
  const Selection forward = {{1, 3, 4}, {2, 2, 3}};
  const Attrs place{{"dtype", int64_t{static_cast<int64_t>(DType::f32)}},
                    {"shape", Ints{13, 7}},
                    {"in_memory", Ints{0}},
                    {"start", Ints{1, 2}},
                    {"step", Ints{3, 2}},
                    {"count", Ints{4, 3}},
                    {"base", false},
                    {"fill", false},
                    {"dynamic", false}};
  std::vector<double> reversed = array_values(out);
  EXPECT_EQ(array_values(test::array_op("place", {out}, {}, {}, place)),
            place_reference({13, 7}, {forward}, {reversed}));
  // One entry per axis of x.
  test::expect_error_mentioning<ValueError>(
      [&] {
        test::array_op("slice", {x}, {}, {},
                       {{"start", Ints{1}}, {"step", Ints{3}}, {"count", Ints{4}}});
      },
      {"kernel 'slice'", "'start'", "2 axes"});
}

}  // namespace
}  // namespace jask
