// XLA FFI entry points: what jitted programs call, one handler per result
// kind. Each (name, handler) goes to jax.ffi.register_ffi_target.
#pragma once
#include <utility>
#include <vector>

namespace jask {
std::vector<std::pair<const char*, void*>> ffi_targets();
}  // namespace jask
