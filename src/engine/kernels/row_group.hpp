// Row groups: ops over "tall" arrays that share their leading dimension N
// (rows), each row of every result depending only on the same row of the
// operands, plus small matrices kept whole in memory. The row_group kernel
// (a group result) runs a group as one pass over row blocks: each tall input
// is read once and only the results are written; intermediates stay in
// memory. When the budget cannot hold one row of every stream, the same nodes
// run one by one as whole-array ops instead (each streams within any budget).
//
// Its typed call (jask's row-group pass writes it), every field an int64 array
// unless said otherwise:
//   label (string, for messages), dtype (float32 or float64: every array's),
//   rows (int64: N).
//   input_kind, input_a, input_b: per array operand, kind 0 tall with
//     input_a elements per row (input_b unused), kind 1 a small matrix of
//     exactly (input_a, input_b).
//   node_kind, node_width, node_trans_b, node_refs, node_n_regs, node_out_reg,
//     node_instrs: per node, in execution order, each producing one value.
//   ref_kind, ref_index: the refs the nodes read, node after node (node_refs
//     each); a ref is 0 an array operand, 1 a scalar operand, 2 the value of an
//     earlier node.
//   op, dst, a, b, c: the instructions of the MAP nodes' programs, node after
//     node (node_instrs each).
//   output_node, output_rank, output_dims (output_rank extents each).
// Nodes:
//   MAP (0)     refs: tall args of width node_width, then scalar args (scalar
//               operands only) -> tall of node_width. Its program's registers
//               are the tall args, the scalar args, then temporaries
//               (node_n_regs in all); node_out_reg is stored; the group's dtype,
//               no reduction. No tall args: a fill.
//   GEMM (1)    refs: X (tall, R x k), S (a small array operand, (k, n), or
//               (n, k) with node_trans_b) -> tall of width n = node_width.
//   GEMM_TN (2) refs: X1, X2 (tall) -> small (w1 x w2): the sum over all rows of X1^T X2.
//   SUM (3)     refs: X (tall) -> scalar: the sum of every element, in double.
// Outputs: tall nodes as (N, ...) with the rest's product = width; GEMM_TN
// nodes as any shape of w1 * w2 elements; SUM nodes as rank 0. Non-scalar
// outputs become new arrays (KernelResult::handles, in output order), SUM
// outputs values (KernelResult::values, in output order). A node may be output
// several times.
#pragma once
#include <cstdint>

#include "call/kernel_call.hpp"

namespace jask {

// Rows per block of the single pass for this row_group call within the memory
// budget, or 0 when not even one row fits and the nodes would run one by one.
// Checks the call as the kernel does.
int64_t group_block_rows(const KernelCall& call);

}  // namespace jask
