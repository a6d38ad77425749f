// Basic-index selections of arrays on disk (x[2:9:3, 5], x[..., ::-1]) and
// their inverse, placing arrays into a larger one: the backward rule of a
// slice and concatenation. Both stream in blocks within the memory budget.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "storage/array_store.hpp"

namespace jask {

// The indices start, start + step, ..., `count` of them, along one axis.
// A negative step walks backwards.
struct AxisSlice {
  int64_t start, step, count;
};
using Selection = std::vector<AxisSlice>;

// Throws ValueError (naming `op`, the axis and the array) unless `sel` has
// one entry per axis of `info` and every selected index is inside the array.
void check_selection(const std::string& op, const ArrayInfo& info, const Selection& sel);
// The selection's shape: the count per axis.
std::vector<int64_t> selected_shape(const Selection& sel);

// x[sel] as a new array: a view of x's file when the selected elements are
// one contiguous range (x[i:j], x[5, 3:9]; no copy), a streamed copy
// otherwise. Covering reads: runs of x that lie close together are read
// with one request through a scratch buffer of a quarter of the budget.
ArrayRef slice_array(const ArrayRef& x, const Selection& sel);
// x[sel] into the caller's buffer.
void slice_into(const ArrayRef& x, const Selection& sel, void* dst, uint64_t nbytes);

// Values placed into a larger array at a selection with positive steps:
// an array on disk, or `data` in memory (the selection's shape, C order).
struct Placement {
  ArrayRef array;
  const void* data = nullptr;
  Selection selection;
};
// What a placement's output holds where no part lands: zeros, one value,
// or the elements of a base array of the output's shape and dtype.
struct Background {
  ArrayRef base;
  double fill = 0.0;
};
// A new array of `info`: each part's values at its selection, the
// background elsewhere (selections must be disjoint). Streams the output in
// blocks; each part's values for a block are one contiguous range of that
// part. Over a zero background, blocks no part reaches are not written (they
// stay sparse zeros).
ArrayRef place_arrays(const ArrayInfo& info, const std::vector<Placement>& parts,
                      const Background& background = {});

}  // namespace jask
