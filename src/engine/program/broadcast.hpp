// Operands of an elementwise program that are smaller than its output,
// broadcast NumPy-style. Each reader fills a block of the output's flat
// C-order elements with the operand's values at those positions, so the
// program itself only ever sees equal-shaped blocks.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "storage/array_store.hpp"

namespace jask {

class OperandReader {
 public:
  virtual ~OperandReader() = default;
  // Writes the `count` values at output elements [first, first + count) to
  // `dst` (storage dtype of the operand).
  virtual void read(int64_t first, int64_t count, void* dst) const = 0;
  // Bytes it keeps in memory for the whole op (counted against the budget).
  virtual int64_t resident_bytes() const { return 0; }
  // Where in a 4096-aligned buffer the block starting at output element
  // `first` should land so that its file-aligned bytes are memory-aligned too
  // (then the read can bypass the page cache even when the file's data offset
  // is not aligned, as in files numpy writes).
  virtual int64_t alignment_shift(int64_t /*first*/) const { return 0; }
};

// `out_shape` is the broadcast result; the operand's shape must broadcast to
// it. Small operands are loaded whole (`resident_limit` bytes at most); larger
// ones are read per block (one range when they vary along leading axes only,
// run by run otherwise).
std::unique_ptr<OperandReader> make_reader(ArrayRef array, const std::vector<int64_t>& out_shape,
                                           int64_t resident_limit);
// An in-memory operand, read in place: `data` must outlive the reader.
std::unique_ptr<OperandReader> make_memory_reader(const void* data, DType dtype,
                                                  const std::vector<int64_t>& shape,
                                                  const std::vector<int64_t>& out_shape);

// NumPy's broadcast of two shapes; throws ValueError naming both.
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

}  // namespace jask
