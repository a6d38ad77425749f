// Out-of-core operations: each streams its operands block by block through
// the pipeline, within the memory budget, and returns a new handle (or a
// scalar for reductions). The kernels built on them register themselves in
// ops.cpp (call/registry.hpp); both entry points reach them through the registry.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "call/kernel_call.hpp"
#include "call/schema.hpp"
#include "program/program.hpp"
#include "storage/array_store.hpp"

namespace jask {

// An elementwise program (program.hpp) over operands broadcast to `out_shape`:
// arrays on disk, then in-memory arrays, then scalars (the program's registers
// in that order). `name` is the user-facing op name, for messages.
struct MemoryArray {
  MemoryOperand bytes;
  DType dtype;
  std::vector<int64_t> shape;
};
struct ProgramCall {
  std::string name;
  std::vector<int32_t> handles;
  std::vector<MemoryArray> memory;
  std::vector<double> scalars;
  std::vector<int64_t> out_shape;
  ProgramCode code;
};
// One output: a new array.
int32_t map_program(const ProgramCall& call);
// Any number of outputs (Program::more_out_regs), all written in one pass.
std::vector<int32_t> map_program_outputs(const ProgramCall& call);
// A program ending in a reduction: its value.
double reduce_program(const ProgramCall& call);
// ProgramCode's fields, declared once for every kernel that carries a program.
const std::vector<FieldDecl<ProgramCode>>& program_code_fields();
// A new array with every element `value` (a program with no instructions).
int32_t fill_array(const ArrayInfo& info, double value);
int32_t transpose_array(int32_t handle, const std::vector<int64_t>& perm);

// Copies src's contents into dst (same shape and dtype; dst writable), all
// at once as far as a crash can tell: see StoredArray::replace_data.
void copy_into(int32_t dst, int32_t src);
// update_tree_: dsts[i] takes srcs[i]'s values, all as one step a crash
// cannot tear (storage/transaction.hpp); names[i] names the pair in messages.
void copy_all_into(const std::vector<int32_t>& dsts, const std::vector<int32_t>& srcs,
                   const std::vector<std::string>& names);
// New .npy file at `path` with the array's contents.
void save_array(int32_t handle, const std::string& path);
// The array's contents into the existing file at `path`, from byte `offset`
// on, in place (streamed in blocks), then flushed.
void save_into(int32_t handle, const std::string& path, uint64_t offset);
// Whole-array transfers between a caller's buffer and the file, streamed in
// budget-sized blocks.
void write_from_memory(int32_t handle, const void* src, uint64_t nbytes);
void read_to_memory(int32_t handle, void* dst, uint64_t nbytes);
// Rows [start, start + count) of the leading axis into `dst`; start is
// clamped to [0, rows - count], as in lax.dynamic_slice.
void read_rows(int32_t handle, int64_t start, int64_t count, void* dst, uint64_t nbytes);

}  // namespace jask
