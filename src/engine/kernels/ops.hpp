// Out-of-core operations: each streams its operands block by block through
// the pipeline, within the memory budget, and returns a new handle (or a
// scalar for reductions). These are what both the eager Python path and the
// XLA FFI handlers call.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/batched_matmul.hpp"
#include "kernels/op_call.hpp"
#include "kernels/row_group.hpp"
#include "storage/array_store.hpp"

namespace jask {

int32_t run_array_op(const OpCall& call);
// Kernels with several DiskArray results (fused multi-output programs).
std::vector<int32_t> run_arrays_op(const OpCall& call);
double run_reduce_op(const OpCall& call);
// Kernels whose result is an in-memory array written to `out`.
void run_dense_op(const OpCall& call, void* out, uint64_t nbytes);

// Elementwise programs (program.hpp) over arrays of one shape.
// `name` is the user-facing op name, for messages. Operands broadcast to the
// output shape given at the start of params (see ProgramOperands in ops.cpp).
int32_t map_program(const std::string& name, const std::vector<int32_t>& handles,
                    const std::vector<DenseOperand>& buffers, const std::vector<double>& scalars,
                    const std::vector<int64_t>& params);
// The same with any number of outputs (Program::more_out_regs), all written in one pass.
std::vector<int32_t> map_program_outputs(const std::string& name,
                                         const std::vector<int32_t>& handles,
                                         const std::vector<DenseOperand>& buffers,
                                         const std::vector<double>& scalars,
                                         const std::vector<int64_t>& params);
double reduce_program(const std::string& name, const std::vector<int32_t>& handles,
                      const std::vector<DenseOperand>& buffers, const std::vector<double>& scalars,
                      const std::vector<int64_t>& params);
// A new array with every element `value` (a program with no instructions).
int32_t fill_array(const ArrayInfo& info, double value);
int32_t transpose_array(int32_t handle, const std::vector<int64_t>& perm);

// Copies src's contents into dst (same shape and dtype; dst writable), all
// at once as far as a crash can tell: see StoredArray::replace_data.
void copy_into(int32_t dst, int32_t src);
// New .npy file at `path` with the array's contents.
void save_array(int32_t handle, const std::string& path);
// Whole-array transfers between a caller's buffer and the file, streamed in
// budget-sized blocks.
void write_from_memory(int32_t handle, const void* src, uint64_t nbytes);
void read_to_memory(int32_t handle, void* dst, uint64_t nbytes);
// Rows [start, start + count) of the leading axis into `dst`; start is
// clamped to [0, rows - count], as in lax.dynamic_slice.
void read_rows(int32_t handle, int64_t start, int64_t count, void* dst, uint64_t nbytes);

}  // namespace jask
