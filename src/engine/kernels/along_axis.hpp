// What the kernels that work along one axis share (scan.cpp: cumulative
// reductions and argmax/argmin; sort.cpp: sorting and permuting rows): an
// array seen as (outer, n, inner) around that axis, and values converted
// between storage and the type folds run in: double for floats, int64 for
// integers and bool (exact; reduction.hpp's IntFold).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/array_info.hpp"
#include "base/errors.hpp"
#include "kernels/kernels.hpp"
#include "program/program.hpp"

namespace jask {

// The array as `outer` blocks of `n` steps along the axis, each step `inner`
// contiguous elements: element (o, k, i) is at o * n * inner + k * inner + i.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

inline AxisView axis_view(const ArrayInfo& info, int64_t axis, const std::string& op) {
  const auto nd = static_cast<int64_t>(info.shape.size());
  if (axis < 0 || axis >= nd) {
    throw ValueError(op + ": axis " + std::to_string(axis) + " is out of range for " +
                     info.describe());
  }
  AxisView v;
  for (int64_t d = 0; d < nd; ++d) {
    if (d < axis) v.outer *= info.shape[d];
    if (d > axis) v.inner *= info.shape[d];
  }
  v.n = info.shape[axis];
  return v;
}

// `count` storage elements of dtype `dt` as doubles.
inline void load_doubles(DType dt, const void* src, int64_t count, double* dst) {
  Program copy{1 + 1, DType::f64, Reduction::kNone, 1, {Instr{Opcode::kCopy, 1, 0, 0, 0}}, {}};
  ProgramRunner runner(copy, {dt}, {});
  runner.run({src}, dst, count);
}

// `count` storage elements of dtype `dt` in the type they fold in: doubles, or (an integer or
// bool dtype) int64 register values.
inline void load_folded(DType dt, const void* src, int64_t count, double* dst) {
  load_doubles(dt, src, count, dst);
}
inline void load_folded(DType dt, const void* src, int64_t count, int64_t* dst) {
  load_ints(dt, src, count, dst);
}

// Stores doubles as `dt`, converted as astype converts.
inline void store_doubles(const double* src, int64_t count, DType dt, void* dst) {
  Program copy{1 + 1, dt, Reduction::kNone, 1, {Instr{Opcode::kCopy, 1, 0, 0, 0}}, {}};
  ProgramRunner runner(copy, {DType::f64}, {});
  runner.run({src}, dst, count);
}

// Stores folded values as `dt`: doubles as astype converts them, int64 register values (an
// integer fold) wrapped to dt's width, as XLA's integer arithmetic wraps.
inline void store_folded(const double* src, int64_t count, DType dt, void* dst) {
  store_doubles(src, count, dt, dst);
}
inline void store_folded(const int64_t* src, int64_t count, DType dt, void* dst) {
  store_ints(src, count, dt, dst);
}

}  // namespace jask
