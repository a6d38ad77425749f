// The type of a stored array: its dtype and shape.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/dtype.hpp"
#include "base/errors.hpp"

namespace jask {

// The most bytes an array (with what comes before it in its file) may span:
// every file offset is an off_t, a signed 64-bit integer.
inline constexpr uint64_t kMaxFileBytes = std::numeric_limits<int64_t>::max();

struct ArrayInfo {
  DType dtype;
  std::vector<int64_t> shape;

  // numel() and nbytes() assume the sizes were checked (check_sizes).
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  uint64_t nbytes() const { return static_cast<uint64_t>(numel()) * itemsize(dtype); }
  // e.g. "float32[4,6]"
  std::string describe() const {
    std::string s = std::string(dtype_name(dtype)) + "[";
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i) s += ",";
      s += std::to_string(shape[i]);
    }
    return s + "]";
  }
};

// "(2048, 4)", "(5,)", "()": a shape as Python writes it.
inline std::string shape_repr(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The one check every array's sizes pass before anything is allocated or
// written: no negative dimension, and the element count, the byte count and
// `data_offset` + the byte count all fit a file offset (no product wraps).
// As in NumPy, zero dimensions count as one in that check, so every
// non-empty slice of an empty array has a size too. Returns the byte count.
// Errors (ValueError) start with `where` (a path or an op).
inline uint64_t check_sizes(const ArrayInfo& info, const std::string& where,
                            uint64_t data_offset = 0) {
  const std::string shape = shape_repr(info.shape);
  const std::string dtype = dtype_name(info.dtype);
  uint64_t bound = itemsize(info.dtype);  // the bytes with every 0 taken as 1
  bool empty = false;
  for (int64_t d : info.shape) {
    if (d < 0) throw ValueError(where + ": negative dimension in shape " + shape);
    empty = empty || d == 0;
    const uint64_t factor = d == 0 ? 1 : static_cast<uint64_t>(d);
    if (__builtin_mul_overflow(bound, factor, &bound) || bound > kMaxFileBytes) {
      throw ValueError(where + ": shape " + shape + " of " + dtype + " is more than the " +
                       std::to_string(kMaxFileBytes) +
                       " bytes (2**63 - 1) a file offset can address");
    }
  }
  const uint64_t bytes = empty ? 0 : bound;
  if (data_offset > kMaxFileBytes - bytes) {
    throw ValueError(where + ": shape " + shape + " of " + dtype + " is " + std::to_string(bytes) +
                     " bytes, which from offset " + std::to_string(data_offset) +
                     " end past the largest file offset, " + std::to_string(kMaxFileBytes));
  }
  return bytes;
}

}  // namespace jask
