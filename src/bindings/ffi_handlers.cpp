// Jitted programs carry arrays as int32 handles. These handlers decode the
// handles and scalar operands, run the engine op (the whole out-of-core loop
// runs here, in C++), and return the new handle or the reduced scalar.
#include "ffi_handlers.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "kernels/ops.hpp"
#include "storage/array_store.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace jask {
namespace {

ffi::Error to_ffi_error(const std::exception& e) {
  if (dynamic_cast<const NotFoundError*>(&e))
    return ffi::Error(ffi::ErrorCode::kNotFound, e.what());
  if (dynamic_cast<const ReadOnlyError*>(&e))
    return ffi::Error(ffi::ErrorCode::kPermissionDenied, e.what());
  if (dynamic_cast<const ValueError*>(&e) || dynamic_cast<const TypeError*>(&e)) {
    return ffi::Error::InvalidArgument(e.what());
  }
  return ffi::Error::Internal(e.what());
}

int32_t handle_value(const ffi::AnyBuffer& buf) {
  return *static_cast<const int32_t*>(buf.untyped_data());
}

double scalar_value(const ffi::AnyBuffer& buf) {
  const void* p = buf.untyped_data();
  switch (buf.element_type()) {
    case ffi::DataType::F32: return *static_cast<const float*>(p);
    case ffi::DataType::F64: return *static_cast<const double*>(p);
    case ffi::DataType::S32: return *static_cast<const int32_t*>(p);
    case ffi::DataType::F16: return f16_to_f32(*static_cast<const uint16_t*>(p));
    case ffi::DataType::BF16: return bf16_to_f32(*static_cast<const uint16_t*>(p));
    case ffi::DataType::PRED: return *static_cast<const uint8_t*>(p) != 0;
    default: throw TypeError("unsupported scalar operand dtype");
  }
}

// Operands: `num_handles` int32 handles, then in-memory operands: 0-d ones
// are scalars, others whole buffers.
OpCall decode_call(std::string_view kernel, ffi::Span<const int64_t> params, int64_t num_handles,
                   const ffi::RemainingArgs& args) {
  OpCall call{std::string(kernel), {}, {}, {params.begin(), params.end()}, {}};
  for (size_t i = 0; i < args.size(); ++i) {
    auto buf = args.get<ffi::AnyBuffer>(i);
    if (!buf.has_value())
      throw ValueError("jask FFI call: cannot decode operand " + std::to_string(i));
    if (static_cast<int64_t>(i) < num_handles) {
      call.handles.push_back(handle_value(*buf));
    } else if (buf->dimensions().size() == 0) {
      call.scalars.push_back(scalar_value(*buf));
    } else {
      call.buffers.push_back(DenseOperand{buf->untyped_data(), buf->size_bytes()});
    }
  }
  return call;
}

ffi::Error array_op(std::string_view kernel, ffi::Span<const int64_t> params, int64_t num_handles,
                    ffi::RemainingArgs args, ffi::ResultBufferR0<ffi::DataType::S32> out) {
  try {
    out->typed_data()[0] = run_array_op(decode_call(kernel, params, num_handles, args));
    return ffi::Error::Success();
  } catch (const std::exception& e) {
    return to_ffi_error(e);
  }
}

ffi::Error arrays_op(std::string_view kernel, ffi::Span<const int64_t> params, int64_t num_handles,
                     ffi::RemainingArgs args, ffi::ResultBufferR1<ffi::DataType::S32> out) {
  try {
    std::vector<int32_t> handles = run_arrays_op(decode_call(kernel, params, num_handles, args));
    if (handles.size() != static_cast<size_t>(out->element_count())) {
      for (int32_t h : handles) Registry::instance().release_floating(h);
      throw ValueError(std::string(kernel) + ": " + std::to_string(handles.size()) +
                       " results for " + std::to_string(out->element_count()) + " result slots");
    }
    std::copy(handles.begin(), handles.end(), out->typed_data());
    return ffi::Error::Success();
  } catch (const std::exception& e) {
    return to_ffi_error(e);
  }
}

void store_scalar(ffi::AnyBuffer& buf, double v) {
  void* p = buf.untyped_data();
  switch (buf.element_type()) {
    case ffi::DataType::F32: *static_cast<float*>(p) = static_cast<float>(v); return;
    case ffi::DataType::F64: *static_cast<double*>(p) = v; return;
    case ffi::DataType::S32:
      *static_cast<int32_t*>(p) = static_cast<int32_t>(static_cast<int64_t>(v));
      return;
    case ffi::DataType::F16: *static_cast<uint16_t*>(p) = f32_to_f16(static_cast<float>(v)); return;
    case ffi::DataType::BF16:
      *static_cast<uint16_t*>(p) = f32_to_bf16(static_cast<float>(v));
      return;
    case ffi::DataType::PRED: *static_cast<uint8_t*>(p) = v != 0; return;
    default: throw TypeError("unsupported reduction result dtype");
  }
}

ffi::Error reduce_op(std::string_view kernel, ffi::Span<const int64_t> params, int64_t num_handles,
                     ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer> out) {
  try {
    store_scalar(*out, run_reduce_op(decode_call(kernel, params, num_handles, args)));
    return ffi::Error::Success();
  } catch (const std::exception& e) {
    return to_ffi_error(e);
  }
}

// Results of a row group: slots for exactly its results, or one unused slot
// (0) when it has none, as XLA callers may not want zero-length results.
void check_slots(std::string_view kernel, const char* what, size_t results, int64_t slots) {
  if (static_cast<int64_t>(results) == slots || (results == 0 && slots == 1)) return;
  throw ValueError(std::string(kernel) + ": " + std::to_string(results) + " " + what + " for " +
                   std::to_string(slots) + " result slots");
}

// The scalar results as float32 or float64 (what JAX holds without or with x64).
void store_values(std::string_view kernel, ffi::AnyBuffer& buf, const std::vector<double>& values) {
  if (buf.dimensions().size() != 1)
    throw ValueError(std::string(kernel) + ": the values result must be 1-D");
  const int64_t slots = buf.dimensions()[0];
  check_slots(kernel, "values", values.size(), slots);
  void* p = buf.untyped_data();
  switch (buf.element_type()) {
    case ffi::DataType::F32:
      for (int64_t i = 0; i < slots; ++i) {
        static_cast<float*>(p)[i] =
            i < static_cast<int64_t>(values.size()) ? static_cast<float>(values[i]) : 0.0f;
      }
      return;
    case ffi::DataType::F64:
      for (int64_t i = 0; i < slots; ++i) {
        static_cast<double*>(p)[i] = i < static_cast<int64_t>(values.size()) ? values[i] : 0.0;
      }
      return;
    default:
      throw TypeError(std::string(kernel) + ": the values result must be float32 or float64");
  }
}

// A row group: its new arrays' handles, and the values of its sums.
ffi::Error group_op(std::string_view kernel, ffi::Span<const int64_t> params, int64_t num_handles,
                    ffi::RemainingArgs args, ffi::ResultBufferR1<ffi::DataType::S32> handles_out,
                    ffi::Result<ffi::AnyBuffer> values_out) {
  try {
    GroupResult r = run_group_op(decode_call(kernel, params, num_handles, args));
    try {
      check_slots(kernel, "arrays", r.handles.size(), handles_out->element_count());
      store_values(kernel, *values_out, r.scalars);
    } catch (...) {
      for (int32_t h : r.handles) Registry::instance().release_floating(h);
      throw;
    }
    int32_t* slots = handles_out->typed_data();
    std::fill(slots, slots + handles_out->element_count(), 0);
    std::copy(r.handles.begin(), r.handles.end(), slots);
    return ffi::Error::Success();
  } catch (const std::exception& e) {
    return to_ffi_error(e);
  }
}

// Frees the first `num_handles` operands if no Python object owns them; the
// other operands are only there to order this call after their producers.
ffi::Error release(int64_t num_handles, ffi::RemainingArgs args,
                   ffi::ResultBufferR0<ffi::DataType::S32> out) {
  for (int64_t i = 0; i < num_handles && i < static_cast<int64_t>(args.size()); ++i) {
    auto buf = args.get<ffi::AnyBuffer>(i);
    if (buf.has_value()) Registry::instance().release_floating(handle_value(*buf));
  }
  out->typed_data()[0] = 0;
  return ffi::Error::Success();
}

ffi::Error dense_op(std::string_view kernel, ffi::Span<const int64_t> params, int64_t num_handles,
                    ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer> out) {
  try {
    run_dense_op(decode_call(kernel, params, num_handles, args), out->untyped_data(),
                 out->size_bytes());
    return ffi::Error::Success();
  } catch (const std::exception& e) {
    return to_ffi_error(e);
  }
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaskDenseOp, dense_op,
                              ffi::Ffi::Bind()
                                  .Attr<std::string_view>("kernel")
                                  .Attr<ffi::Span<const int64_t>>("params")
                                  .Attr<int64_t>("num_handles")
                                  .RemainingArgs()
                                  .Ret<ffi::AnyBuffer>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaskArrayOp, array_op,
                              ffi::Ffi::Bind()
                                  .Attr<std::string_view>("kernel")
                                  .Attr<ffi::Span<const int64_t>>("params")
                                  .Attr<int64_t>("num_handles")
                                  .RemainingArgs()
                                  .Ret<ffi::BufferR0<ffi::DataType::S32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaskArraysOp, arrays_op,
                              ffi::Ffi::Bind()
                                  .Attr<std::string_view>("kernel")
                                  .Attr<ffi::Span<const int64_t>>("params")
                                  .Attr<int64_t>("num_handles")
                                  .RemainingArgs()
                                  .Ret<ffi::BufferR1<ffi::DataType::S32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaskGroupOp, group_op,
                              ffi::Ffi::Bind()
                                  .Attr<std::string_view>("kernel")
                                  .Attr<ffi::Span<const int64_t>>("params")
                                  .Attr<int64_t>("num_handles")
                                  .RemainingArgs()
                                  .Ret<ffi::BufferR1<ffi::DataType::S32>>()
                                  .Ret<ffi::AnyBuffer>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaskReduceOp, reduce_op,
                              ffi::Ffi::Bind()
                                  .Attr<std::string_view>("kernel")
                                  .Attr<ffi::Span<const int64_t>>("params")
                                  .Attr<int64_t>("num_handles")
                                  .RemainingArgs()
                                  .Ret<ffi::AnyBuffer>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaskRelease, release,
                              ffi::Ffi::Bind()
                                  .Attr<int64_t>("num_handles")
                                  .RemainingArgs()
                                  .Ret<ffi::BufferR0<ffi::DataType::S32>>());

void* ffi_array_op_handler() { return reinterpret_cast<void*>(JaskArrayOp); }
void* ffi_arrays_op_handler() { return reinterpret_cast<void*>(JaskArraysOp); }
void* ffi_group_op_handler() { return reinterpret_cast<void*>(JaskGroupOp); }
void* ffi_reduce_op_handler() { return reinterpret_cast<void*>(JaskReduceOp); }
void* ffi_release_handler() { return reinterpret_cast<void*>(JaskRelease); }
void* ffi_dense_op_handler() { return reinterpret_cast<void*>(JaskDenseOp); }

}  // namespace jask
