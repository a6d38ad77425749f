// In-memory block kernels. Storage dtypes are widened to a compute type per
// element (float for float32/float16/bfloat16, double for float64, int64
// for int32) and narrowed back on store.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "dtype.hpp"

namespace jask {

// Elementwise maps; `scalar` is the operand of the *Scalar ops, kScale and kFill.
enum class MapOp { kAdd, kSub, kMul, kNeg, kSquare, kScale, kAddScalar, kRsubScalar, kCopy, kFill };

std::optional<MapOp> map_op_from_name(const std::string& name);
int map_op_arity(MapOp op);  // array inputs: 0, 1 or 2

void map_block(MapOp op, DType dt, const void* a, const void* b, void* out, int64_t n, double scalar);

enum class ReduceOp { kSum, kSumMul };
std::optional<ReduceOp> reduce_op_from_name(const std::string& name);
int reduce_op_arity(ReduceOp op);

// Partial result of one block; combined across blocks by addition.
double reduce_block(ReduceOp op, DType dt, const void* a, const void* b, int64_t n);

// Widen n storage elements to float (for float32/16/bf16) or double (for
// float64/int32). `dst` may overlap the back of `src`'s storage when widening
// in place; see widen_in_place.
size_t compute_itemsize(DType dt);
void widen_in_place(DType dt, void* buf, int64_t n);   // storage at the back half -> compute
void narrow_in_place(DType dt, void* buf, int64_t n);  // compute -> storage at the front

// N-D permutation of an in-memory tile: out[i_0..] = in[...] with
// out axis d = in axis perm[d]. `in_ext` are the input tile extents.
void permute_tile(const void* in, void* out, const int64_t* in_ext, const int64_t* perm, int nd,
                  size_t elem_bytes);

}  // namespace jask
