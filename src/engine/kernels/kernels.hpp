// In-memory helpers for the blocks of matmul, gathers and transpose: storage
// dtypes widened in place to a compute type (float for float32/float16/
// bfloat16/float8, double for float64, int64 for integers and bool) and
// narrowed back, and tile permutation. Elementwise arithmetic and full reductions are programs
// (program.hpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "base/dtype.hpp"

namespace jask {

// The compute type's size: 4 (float), 8 (double, int64). Integers compute
// in int64 (uint64: its bits), exactly: sums and products wrap modulo 2^64
// and narrowing wraps them on to the dtype's width, as XLA's do.
size_t compute_itemsize(DType dt);
void widen_in_place(DType dt, void* buf, int64_t n);   // storage at the back half -> compute
void narrow_in_place(DType dt, void* buf, int64_t n);  // compute -> storage at the front
// n storage elements of integer (or bool) dtype `dt` as int64 register values
// (sign- or zero-extended), and back: wrapped to dt's width (bool: != 0).
void load_ints(DType dt, const void* src, int64_t n, int64_t* dst);
void store_ints(const int64_t* src, int64_t n, DType dt, void* dst);

// N-D permutation of an in-memory tile: out[i_0..] = in[...] with
// out axis d = in axis perm[d]. `in_ext` are the input tile extents.
void permute_tile(const void* in, void* out, const int64_t* in_ext, const int64_t* perm, int nd,
                  size_t elem_bytes);

}  // namespace jask
