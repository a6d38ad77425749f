// The engine's side of the block route (jask/ops/block_map.py): XLA computes
// a primitive block by block along an axis it is independent along, and the
// engine moves the blocks. Reading a block is the `rows` kernel (which reads
// the next rows ahead); these two make and fill the result:
//   empty      a new scratch array that the route writes whole, block by block
//              (its file may be a recycled one: no byte is read before written);
//   put_block  rows [start, start + count) of such an array written in place
//              from memory. It returns the array's own handle, so that every
//              later read of the result in the program depends on the write.
#include <string>

#include "base/array_info.hpp"
#include "base/errors.hpp"
#include "call/registry.hpp"
#include "storage/array_store.hpp"

namespace jask {
namespace {

Registry& reg() { return Registry::instance(); }

struct EmptyParams {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
};
const Schema<EmptyParams> kEmptySchema{field("dtype", &EmptyParams::dtype),
                                       field("shape", &EmptyParams::shape)};

int32_t run_empty(const KernelCall& call, const EmptyParams& p) {
  expect_operands(call, 0, 0, 0);
  const ArrayInfo info{p.dtype, p.shape};
  check_sizes(info, "empty");
  return reg().add(StoredArray::create_scratch(info, "block_map", ScratchContents::kOverwritten));
}
const KernelRegistration kEmpty{"empty", kEmptySchema, run_empty};

int32_t run_put_block(const KernelCall& call, const NoParams&) {
  expect_operands(call, 1, 1, 1);
  const int32_t handle = call.operands.handles[0];
  ArrayRef arr = reg().get(handle);
  const ArrayInfo& info = arr->info();
  if (!arr->is_scratch() || !arr->writable()) {
    throw ValueError("put_block: " + arr->path() + " is not a scratch array being filled");
  }
  if (info.shape.empty()) throw ValueError("put_block: " + info.describe() + " has no rows");
  int64_t per_row = 1;
  for (size_t d = 1; d < info.shape.size(); ++d) per_row *= info.shape[d];
  const uint64_t row_bytes = static_cast<uint64_t>(per_row) * itemsize(info.dtype);
  const MemoryOperand& block = call.operands.memory[0];
  const double start = call.operands.scalars[0];
  if (row_bytes == 0) return handle;
  const int64_t count = static_cast<int64_t>(block.nbytes / row_bytes);
  if (block.nbytes % row_bytes != 0 || !(start >= 0) ||
      start + static_cast<double>(count) > static_cast<double>(info.shape[0])) {
    throw ValueError("put_block: " + std::to_string(block.nbytes) + " bytes at row " +
                     std::to_string(start) + " are not whole rows inside " + info.describe());
  }
  const auto first = static_cast<int64_t>(start);
  arr->write_elems(block.data, first * per_row, count * per_row);
  return handle;
}
const KernelRegistration kPutBlock{"put_block", Schema<NoParams>{}, run_put_block};

}  // namespace
}  // namespace jask
