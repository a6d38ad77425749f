// One call of an engine kernel as both entry points hand it over: the XLA FFI
// handlers (jitted programs) and the nanobind module (eager calls) each stage
// their operands into KernelOperands and their named parameters into Attrs,
// and the kernel's Schema (schema.hpp) decodes the Attrs into its typed params.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace jask {

// A parameter value as it crosses the boundary: an XLA FFI attribute or a
// Python value (bool, int, float, str, a sequence of ints).
using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>>;
// Parameters by name.
using Attrs = std::map<std::string, AttrValue, std::less<>>;

// "an int64", "a string", ... for messages.
const char* attr_type_name(const AttrValue& value);

// An in-memory operand (a bias, a mini-batch's cotangent, an index array),
// read in place: host memory that outlives the call.
struct MemoryOperand {
  const void* data;
  uint64_t nbytes;
};

// The operands of a call, in the order the caller lists them by kind.
struct KernelOperands {
  std::vector<int32_t> handles = {};       // arrays on disk (registry handles)
  std::vector<double> scalars = {};        // 0-d operands
  std::vector<MemoryOperand> memory = {};  // other in-memory operands
};

// Where an in-memory result goes (host memory of exactly its size).
struct MemoryResult {
  void* data = nullptr;
  uint64_t nbytes = 0;
};

struct KernelCall {
  std::string kernel;
  KernelOperands operands = {};
  Attrs attrs = {};
  MemoryResult out = {};  // in-memory results only
  // The jitted program making the call (a slot of base/memory_budget.hpp; 0
  // for an eager call): what it holds in memory is kept out of the budget.
  int32_t program = 0;
  // Which run of the program (XLA's run id): its calls share one progress bar.
  int64_t run = 0;
};

}  // namespace jask
