// One call of an engine kernel, as both entry points (the XLA FFI handlers
// and the nanobind module) hand it over.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace jask {

struct DenseOperand {
  const void* data;
  uint64_t nbytes;
};
struct OpCall {
  std::string kernel;                      // e.g. "map/add", "fill", "transpose", "matmul"
  std::vector<int32_t> handles;            // array operands
  std::vector<double> scalars;             // 0-d operands
  std::vector<int64_t> params;             // static integer parameters
  std::vector<DenseOperand> buffers = {};  // in-memory operands (from_dense, put_rows)
};

}  // namespace jask
