// The kernel registry: every engine kernel registers itself, next to its
// code, by name with its result kind and its Schema; an entry point runs a
// call with one lookup. Registration is one line per kernel:
//
//   const KernelRegistration kTranspose{"transpose", kTransposeSchema, run_transpose};
//
// where run_transpose(const KernelCall&, const TransposeParams&) returns what
// its result kind is made of (below). Registrations are static objects, so the
// engine is linked as object files (CMakeLists.txt): none may be dropped.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "call/kernel_call.hpp"
#include "call/schema.hpp"

namespace jask {

// What a kernel returns, and which FFI handler serves it.
enum class ResultKind {
  kArray,     // one new array: int32_t
  kArrays,    // several new arrays: std::vector<int32_t>
  kScalar,    // one value: double
  kInMemory,  // an in-memory array written to KernelCall::out: void
  kGroup,     // new arrays and values: KernelResult (a row group)
};
const char* result_kind_name(ResultKind kind);

// The result of any kernel: its new arrays' handles (floating: the caller
// takes ownership or frees them) and its values, in output order.
struct KernelResult {
  std::vector<int32_t> handles;
  std::vector<double> values;
};

// Whether run_kernel pins the files of a kernel's operands for the call
// (ReadPins). A kernel that writes its operands in place holds their readers
// back itself (SharedFile::with_readers_held), which its own pins would block.
enum class OperandPins { kPinned, kKernelHoldsReaders };

struct KernelEntry {
  std::string name;
  ResultKind kind;
  std::vector<FieldInfo> fields;
  std::function<KernelResult(const KernelCall&)> run;
  OperandPins pins = OperandPins::kPinned;
};

class KernelRegistry {
 public:
  static KernelRegistry& instance();
  // Throws std::logic_error if (kind, name) is registered already.
  void add(KernelEntry entry);
  // The kernel `name` of `kind`; ValueError naming the kernel (and the kinds it
  // has, if any) otherwise.
  const KernelEntry& find(ResultKind kind, std::string_view name) const;
  std::vector<const KernelEntry*> entries() const;

 private:
  KernelRegistry() = default;
  std::vector<KernelEntry> entries_;
};

// Throws ValueError naming the kernel unless the call has exactly these operand counts.
void expect_operands(const KernelCall& call, size_t handles, size_t scalars, size_t memory);

// Runs call.kernel as a kernel of `kind`: one lookup, the schema's decoding, the kernel.
KernelResult run_kernel(ResultKind kind, const KernelCall& call);

namespace registry_detail {

template <class R>
constexpr ResultKind kind_of() {
  if constexpr (std::is_same_v<R, int32_t>) return ResultKind::kArray;
  if constexpr (std::is_same_v<R, std::vector<int32_t>>) return ResultKind::kArrays;
  if constexpr (std::is_same_v<R, double>) return ResultKind::kScalar;
  if constexpr (std::is_void_v<R>) return ResultKind::kInMemory;
  if constexpr (std::is_same_v<R, KernelResult>) return ResultKind::kGroup;
}

template <class R, class F>
KernelResult as_result(F&& run) {
  if constexpr (std::is_void_v<R>) {
    run();
    return {};
  } else if constexpr (std::is_same_v<R, int32_t>) {
    return {{run()}, {}};
  } else if constexpr (std::is_same_v<R, std::vector<int32_t>>) {
    return {run(), {}};
  } else if constexpr (std::is_same_v<R, double>) {
    return {{}, {run()}};
  } else {
    static_assert(std::is_same_v<R, KernelResult>, "a kernel returns one of the result kinds");
    return run();
  }
}

}  // namespace registry_detail

// Registers `run` as kernel `name`; the result kind follows from its return type.
class KernelRegistration {
 public:
  template <class P, class Fn>
  KernelRegistration(std::string name, const Schema<P>& schema, Fn run,
                     OperandPins pins = OperandPins::kPinned) {
    using R = std::invoke_result_t<Fn, const KernelCall&, const P&>;
    KernelRegistry::instance().add(KernelEntry{name, registry_detail::kind_of<R>(), schema.fields(),
                                               [name, schema, run](const KernelCall& call) {
                                                 const P params = schema.decode(name, call.attrs);
                                                 return registry_detail::as_result<R>(
                                                     [&]() { return run(call, params); });
                                               },
                                               pins});
  }
};

}  // namespace jask
