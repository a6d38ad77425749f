// Row gathers along the leading axis (x[idx], jnp.take(x, idx, axis=0)) and
// their adjoint, the scatter-add of rows into zeros. Indices arrive in
// memory; x and the results stay on disk, streamed in row blocks within the
// memory budget.
#pragma once
#include <cstdint>
#include <vector>

#include "call/kernel_call.hpp"
#include "storage/array_store.hpp"

namespace jask {

// In-memory row indices, 4 or 8 bytes each (int32 or int64).
struct RowIndices {
  const void* data;
  int64_t count;
  int64_t itemsize;
};
// Checks that `nbytes` holds whole indices of `itemsize` bytes.
RowIndices row_indices(const std::string& op, const MemoryOperand& buffer, int64_t itemsize);

// Index semantics shared by both directions: a negative index counts from
// the end once; anything still out of [0, rows) is clamped to it (what XLA
// gathers do with traced indices; concrete ones are checked in Python).

// Rows of x at idx, in index order, into the caller's buffer
// (idx.count rows of x's row size).
void gather_rows_into(const ArrayRef& x, const RowIndices& idx, void* out, uint64_t nbytes);
// The same into a new array of `out_shape` (idx's shape + x's row shape).
ArrayRef gather_rows(const ArrayRef& x, const RowIndices& idx,
                     const std::vector<int64_t>& out_shape);

// Rows to scatter: an array on disk, or idx.count rows in memory.
struct RowSource {
  ArrayRef array;                // when on disk
  const void* memory = nullptr;  // when in memory
  uint64_t nbytes = 0;
};
// A new array of `info`: zeros, plus row i of `rows` added at row idx[i];
// duplicate indices accumulate.
ArrayRef scatter_add_rows(const ArrayInfo& info, const RowSource& rows, const RowIndices& idx);

}  // namespace jask
