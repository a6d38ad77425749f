// Out-of-core matrix products with batch axes, as numpy.matmul:
// C[..., i, j] = sum_k op(A)[..., i, k] op(B)[..., k, j], where op(X) swaps
// X's last two axes when its transpose flag is set and the leading (batch)
// axes broadcast. Each output matrix is the tiled 2-D product of one stored
// matrix of A and one of B, addressed inside their files by element offset;
// all output matrices run as one pipeline, so a broadcast operand whose tiles
// stay in their slot is read once, and matrices small enough to be one tile
// go as many to a task as the budget holds (one read per run of consecutive
// matrices, one write per task).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace jask {

// numpy.matmul of op(a) and op(b), batch axes broadcast; op transposes the last two
// axes of an operand whose flag is set.
int32_t matmul_arrays(int32_t a, int32_t b, bool trans_a, bool trans_b);

// Which stored matrix of each operand an output matrix reads. Matrices are
// counted in C order over the batch axes; the shapes align on the right and
// an axis of size 1 (or a missing one) is read again for every index.
class BatchBroadcast {
 public:
  // Throws ValueError naming `operands` when the batch shapes do not broadcast.
  BatchBroadcast(const std::vector<int64_t>& a_batch, const std::vector<int64_t>& b_batch,
                 const std::string& operands);
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t count() const;  // output matrices
  int64_t a_matrix(int64_t out) const { return operand_matrix(out, a_stride_); }
  int64_t b_matrix(int64_t out) const { return operand_matrix(out, b_stride_); }

 private:
  int64_t operand_matrix(int64_t out, const std::vector<int64_t>& stride) const;
  std::vector<int64_t> shape_, a_stride_, b_stride_;
};

}  // namespace jask
