// Row groups: ops over "tall" arrays that share their leading dimension N
// (rows), each row of every result depending only on the same row of the
// operands, plus small matrices kept whole in memory. run_group_op (ops.hpp)
// runs a group as one pass over row blocks: each tall input is read once and
// only the results are written; intermediates stay in memory. When the
// budget cannot hold one row of every stream, the same nodes run one by one
// as whole-array ops instead (each streams within any budget).
//
// params, all int64 (jask/ops/_rowgroup.py writes them):
//   [dtype_code, N,
//    n_in, (kind, a, b) x n_in          handle i: kind 0 tall, a = elements per row (b unused);
//                                        kind 1 small matrix of exactly (a, b)
//    n_nodes, node x n_nodes,            in execution order, each producing one value
//    n_out, (node, rank, shape...) x n_out]
// Every array has dtype_code's dtype, float32 or float64.
// A ref is (kind, index): 0 a handle, 1 a scalar operand (OpCall::scalars),
// 2 the value of an earlier node.
//   MAP     [0, width, n_args, ref x n_args, n_prog, program x n_prog] -> tall of `width`;
//           tall args of that width first, then scalar args (scalar operands only);
//           program: Program::decode's format, registers = tall args, scalar args,
//           temporaries; no reduction, one output, the group's dtype.
//           No tall args: a fill.
//   GEMM    [1, ref_tall, ref_small, trans_b, n] -> tall of width n: X (R x k) @ op(S),
//           S a small handle, (k, n), or (n, k) with trans_b.
//   GEMM_TN [2, ref_tall_1, ref_tall_2] -> small (w1 x w2): the sum over all rows of X1^T X2.
//   SUM     [3, ref_tall] -> scalar: the sum of every element, in double.
// Outputs: tall nodes as (N, ...) with the rest's product = width; GEMM_TN nodes
// as any shape of w1 * w2 elements; SUM nodes as rank 0. Non-scalar outputs
// become new arrays (GroupResult::handles, in output order), SUM outputs
// GroupResult::scalars (in output order). A node may be output several times.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/op_call.hpp"

namespace jask {

// New arrays for the non-scalar outputs, in output order, and the values of
// the scalar outputs, in output order.
struct GroupResult {
  std::vector<int32_t> handles;
  std::vector<double> scalars;
};
// "row_group/<label>": the group described by call.params (above).
GroupResult run_group_op(const OpCall& call);

// Rows per block of the single pass for this call within the memory budget,
// or 0 when not even one row fits and the nodes would run one by one.
// Checks the params as run_group_op does.
int64_t group_block_rows(const OpCall& call);

}  // namespace jask
