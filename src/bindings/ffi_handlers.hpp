// XLA FFI entry points: what jitted programs call. Each returns a capsule
// for jax.ffi.register_ffi_target.
#pragma once

namespace jask {
void* ffi_array_op_handler();
void* ffi_arrays_op_handler();
void* ffi_group_op_handler();
void* ffi_reduce_op_handler();
void* ffi_release_handler();
void* ffi_dense_op_handler();
}  // namespace jask
