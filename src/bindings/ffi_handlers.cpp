// Jitted programs carry arrays as int32 handles. Each handler stages its XLA
// FFI call into the engine's KernelCall (operands by kind, attributes by name),
// runs the kernel through the registry (the whole out-of-core loop runs here,
// in C++), and stores the result. One handler per result kind; the kernel's
// own schema decodes its attributes.
#include "ffi_handlers.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "call/registry.hpp"
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
    case ffi::DataType::S8: return *static_cast<const int8_t*>(p);
    case ffi::DataType::S16: return *static_cast<const int16_t*>(p);
    case ffi::DataType::S64: return static_cast<double>(*static_cast<const int64_t*>(p));
    case ffi::DataType::U8: return *static_cast<const uint8_t*>(p);
    case ffi::DataType::U16: return *static_cast<const uint16_t*>(p);
    case ffi::DataType::U32: return *static_cast<const uint32_t*>(p);
    case ffi::DataType::U64: return static_cast<double>(*static_cast<const uint64_t*>(p));
    default: throw TypeError("unsupported scalar operand dtype");
  }
}

// One attribute as the engine's AttrValue (what jask's Python side sends:
// bools, int64 scalars, strings and int64 arrays).
template <class T>
std::vector<int64_t> widened(ffi::Span<const T> values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

// (The dictionary's typed lookup by name tells the types apart: a decoding of
// the wrong type fails without side effects.)
AttrValue attr_value(const ffi::Dictionary& attrs, std::string_view name, std::string_view kernel) {
  if (auto v = attrs.get<bool>(name); v.has_value()) return *v;
  if (auto v = attrs.get<int64_t>(name); v.has_value()) return *v;
  if (auto v = attrs.get<int32_t>(name); v.has_value()) return int64_t{*v};
  if (auto v = attrs.get<double>(name); v.has_value()) return *v;
  if (auto v = attrs.get<float>(name); v.has_value()) return double{*v};
  if (auto v = attrs.get<std::string_view>(name); v.has_value()) return std::string(*v);
  if (auto v = attrs.get<ffi::Span<const int64_t>>(name); v.has_value()) return widened(*v);
  if (auto v = attrs.get<ffi::Span<const int32_t>>(name); v.has_value()) return widened(*v);
  reject_field(kernel, name, "has a type kernels do not take");
}

// Operands: `num_handles` int32 handles, then in-memory operands: 0-d ones
// are scalars, others whole buffers (read in place: host memory on the CPU).
KernelCall stage_call(ffi::RunId run, const ffi::RemainingArgs& args,
                      const ffi::Dictionary& attrs) {
  KernelCall call;
  call.run = run.run_id;
  auto kernel = attrs.get<std::string_view>("kernel");
  if (!kernel.has_value()) throw ValueError("jask FFI call: no 'kernel' attribute");
  call.kernel = std::string(*kernel);
  auto num_handles = attrs.get<int64_t>("num_handles");
  if (!num_handles.has_value()) reject_field(call.kernel, "num_handles", "is missing (an int64)");
  if (auto program = attrs.get<int64_t>("jask_program"); program.has_value())
    call.program = static_cast<int32_t>(*program);
  for (auto it = attrs.begin(); it != attrs.end(); ++it) {
    const std::string_view name = *it;
    if (name == "kernel" || name == "num_handles" || name == "jask_program") continue;
    call.attrs.emplace(std::string(name), attr_value(attrs, name, call.kernel));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    auto buf = args.get<ffi::AnyBuffer>(i);
    if (!buf.has_value()) {
      throw ValueError("kernel '" + call.kernel + "': cannot decode operand " + std::to_string(i));
    }
    if (static_cast<int64_t>(i) < *num_handles) {
      call.operands.handles.push_back(handle_value(*buf));
    } else if (buf->dimensions().size() == 0) {
      call.operands.scalars.push_back(scalar_value(*buf));
    } else {
      call.operands.memory.push_back(MemoryOperand{buf->untyped_data(), buf->size_bytes()});
    }
  }
  return call;
}

// Frees new arrays a result slot could not take.
void release_all(const std::vector<int32_t>& handles) {
  for (int32_t h : handles) Registry::instance().release_floating(h);
}

// Results of a row group or fused program: slots for exactly its arrays (or
// values), or one unused slot (0) when it has none, as XLA callers may not
// want zero-length results.
void check_slots(const std::string& kernel, const char* what, size_t results, int64_t slots) {
  if (static_cast<int64_t>(results) == slots || (results == 0 && slots == 1)) return;
  throw ValueError(kernel + ": " + std::to_string(results) + " " + what + " for " +
                   std::to_string(slots) + " result slots");
}

void store_handles(const std::string& kernel, const std::vector<int32_t>& handles,
                   ffi::ResultBufferR1<ffi::DataType::S32>& out) {
  check_slots(kernel, "arrays", handles.size(), out->element_count());
  int32_t* slots = out->typed_data();
  std::fill(slots, slots + out->element_count(), 0);
  std::copy(handles.begin(), handles.end(), slots);
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

// The values as float32 or float64 (what JAX holds without or with x64).
void store_values(const std::string& kernel, ffi::AnyBuffer& buf,
                  const std::vector<double>& values) {
  if (buf.dimensions().size() != 1) throw ValueError(kernel + ": the values result must be 1-D");
  const int64_t slots = buf.dimensions()[0];
  check_slots(kernel, "values", values.size(), slots);
  void* p = buf.untyped_data();
  auto value = [&](int64_t i) { return i < static_cast<int64_t>(values.size()) ? values[i] : 0.0; };
  switch (buf.element_type()) {
    case ffi::DataType::F32:
      for (int64_t i = 0; i < slots; ++i) static_cast<float*>(p)[i] = static_cast<float>(value(i));
      return;
    case ffi::DataType::F64:
      for (int64_t i = 0; i < slots; ++i) static_cast<double*>(p)[i] = value(i);
      return;
    default: throw TypeError(kernel + ": the values result must be float32 or float64");
  }
}

// Runs `body` and turns engine exceptions into FFI errors. A failed call
// fails its program: the run's floating arrays go (Registry::fail_run).
template <class Body>
ffi::Error guarded(ffi::RunId run, Body body) {
  try {
    body();
    return ffi::Error::Success();
  } catch (const std::exception& e) {
    Registry::instance().fail_run(run.run_id);
    return to_ffi_error(e);
  }
}

// The handles a call of `run` made, noted for Registry::fail_run.
const std::vector<int32_t>& made_in(ffi::RunId run, const std::vector<int32_t>& handles) {
  for (int32_t h : handles) Registry::instance().made_in_run(h, run.run_id);
  return handles;
}

ffi::Error array_op(ffi::RunId run, ffi::RemainingArgs args,
                    ffi::ResultBufferR0<ffi::DataType::S32> out, ffi::Dictionary attrs) {
  return guarded(run, [&] {
    out->typed_data()[0] =
        made_in(run, run_kernel(ResultKind::kArray, stage_call(run, args, attrs)).handles).at(0);
  });
}

ffi::Error arrays_op(ffi::RunId run, ffi::RemainingArgs args,
                     ffi::ResultBufferR1<ffi::DataType::S32> out, ffi::Dictionary attrs) {
  return guarded(run, [&] {
    const KernelCall call = stage_call(run, args, attrs);
    KernelResult r = run_kernel(ResultKind::kArrays, call);
    made_in(run, r.handles);
    if (r.handles.size() != static_cast<size_t>(out->element_count())) {
      release_all(r.handles);
      throw ValueError(call.kernel + ": " + std::to_string(r.handles.size()) + " results for " +
                       std::to_string(out->element_count()) + " result slots");
    }
    std::copy(r.handles.begin(), r.handles.end(), out->typed_data());
  });
}

ffi::Error scalar_op(ffi::RunId run, ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer> out,
                     ffi::Dictionary attrs) {
  return guarded(run, [&] {
    store_scalar(*out, run_kernel(ResultKind::kScalar, stage_call(run, args, attrs)).values.at(0));
  });
}

ffi::Error in_memory_op(ffi::RunId run, ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer> out,
                        ffi::Dictionary attrs) {
  return guarded(run, [&] {
    KernelCall call = stage_call(run, args, attrs);
    call.out = MemoryResult{out->untyped_data(), out->size_bytes()};
    run_kernel(ResultKind::kInMemory, call);
  });
}

// A row group: its new arrays' handles, and the values of its sums.
ffi::Error group_op(ffi::RunId run, ffi::RemainingArgs args,
                    ffi::ResultBufferR1<ffi::DataType::S32> handles_out,
                    ffi::Result<ffi::AnyBuffer> values_out, ffi::Dictionary attrs) {
  return guarded(run, [&] {
    const KernelCall call = stage_call(run, args, attrs);
    KernelResult r = run_kernel(ResultKind::kGroup, call);
    made_in(run, r.handles);
    try {
      store_values(call.kernel, *values_out, r.values);
      store_handles(call.kernel, r.handles, handles_out);
    } catch (...) {
      release_all(r.handles);
      throw;
    }
  });
}

// Frees the first `num_handles` operands if no Python object owns them; the
// other operands are only there to order this call after their producers.
ffi::Error release(ffi::RemainingArgs args, ffi::ResultBufferR0<ffi::DataType::S32> out,
                   int64_t num_handles) {
  for (int64_t i = 0; i < num_handles && i < static_cast<int64_t>(args.size()); ++i) {
    auto buf = args.get<ffi::AnyBuffer>(i);
    if (buf.has_value()) Registry::instance().release_floating(handle_value(*buf));
  }
  out->typed_data()[0] = 0;
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaskArrayOp, array_op,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::RunId>()
                                  .RemainingArgs()
                                  .Ret<ffi::BufferR0<ffi::DataType::S32>>()
                                  .Attrs<ffi::Dictionary>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaskArraysOp, arrays_op,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::RunId>()
                                  .RemainingArgs()
                                  .Ret<ffi::BufferR1<ffi::DataType::S32>>()
                                  .Attrs<ffi::Dictionary>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaskScalarOp, scalar_op,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::RunId>()
                                  .RemainingArgs()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attrs<ffi::Dictionary>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaskInMemoryOp, in_memory_op,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::RunId>()
                                  .RemainingArgs()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attrs<ffi::Dictionary>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaskGroupOp, group_op,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::RunId>()
                                  .RemainingArgs()
                                  .Ret<ffi::BufferR1<ffi::DataType::S32>>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attrs<ffi::Dictionary>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaskRelease, release,
    ffi::Ffi::Bind().RemainingArgs().Ret<ffi::BufferR0<ffi::DataType::S32>>().Attr<int64_t>(
        "num_handles"));

std::vector<std::pair<const char*, void*>> ffi_targets() {
  return {{"jask_array_op", reinterpret_cast<void*>(JaskArrayOp)},
          {"jask_arrays_op", reinterpret_cast<void*>(JaskArraysOp)},
          {"jask_scalar_op", reinterpret_cast<void*>(JaskScalarOp)},
          {"jask_in_memory_op", reinterpret_cast<void*>(JaskInMemoryOp)},
          {"jask_group_op", reinterpret_cast<void*>(JaskGroupOp)},
          {"jask_release", reinterpret_cast<void*>(JaskRelease)}};
}

}  // namespace jask
