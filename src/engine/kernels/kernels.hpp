// In-memory helpers for the blocks of matmul, gathers and transpose: storage
// dtypes widened in place to a compute type (float for float32/float16/
// bfloat16, double for float64/int32) and narrowed back, and tile
// permutation. Elementwise arithmetic and full reductions are programs
// (program.hpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "base/dtype.hpp"

namespace jask {

// Widen n storage elements to float (for float32/16/bf16) or double (for
// float64/int32). `dst` may overlap the back of `src`'s storage when widening
// in place; see widen_in_place.
size_t compute_itemsize(DType dt);
void widen_in_place(DType dt, void* buf, int64_t n);   // storage at the back half -> compute
void narrow_in_place(DType dt, void* buf, int64_t n);  // compute -> storage at the front
// An integer-valued double (a fold of integers) stored as integer or bool dtype `dt`:
// wrapped to its width, as XLA's integer arithmetic wraps.
void store_double_as_int(DType dt, double d, void* dst);

// N-D permutation of an in-memory tile: out[i_0..] = in[...] with
// out axis d = in axis perm[d]. `in_ext` are the input tile extents.
void permute_tile(const void* in, void* out, const int64_t* in_ext, const int64_t* perm, int nd,
                  size_t elem_bytes);

}  // namespace jask
