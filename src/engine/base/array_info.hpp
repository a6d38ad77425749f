// The type of a stored array: its dtype and shape.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.hpp"

namespace jask {

struct ArrayInfo {
  DType dtype;
  std::vector<int64_t> shape;

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

}  // namespace jask
