#include "call/registry.hpp"

#include <stdexcept>

#include "base/errors.hpp"
#include "base/memory_budget.hpp"
#include "exec/stats.hpp"
#include "storage/array_store.hpp"
#include "storage/chunked.hpp"
#include "storage/readahead.hpp"

namespace jask {

const char* result_kind_name(ResultKind kind) {
  switch (kind) {
    case ResultKind::kArray: return "array";
    case ResultKind::kArrays: return "arrays";
    case ResultKind::kScalar: return "scalar";
    case ResultKind::kInMemory: return "in-memory";
    case ResultKind::kGroup: return "group";
  }
  return "?";
}

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry registry;
  return registry;
}

void KernelRegistry::add(KernelEntry entry) {
  for (const KernelEntry& e : entries_) {
    if (e.kind == entry.kind && e.name == entry.name) {
      throw std::logic_error("kernel '" + entry.name + "' (" + result_kind_name(entry.kind) +
                             ") is registered twice");
    }
  }
  entries_.push_back(std::move(entry));
}

const KernelEntry& KernelRegistry::find(ResultKind kind, std::string_view name) const {
  std::string other_kinds;
  for (const KernelEntry& e : entries_) {
    if (e.name != name) continue;
    if (e.kind == kind) return e;
    other_kinds += std::string(other_kinds.empty() ? "" : ", ") + result_kind_name(e.kind);
  }
  std::string message =
      "unknown " + std::string(result_kind_name(kind)) + " kernel '" + std::string(name) + "'";
  if (!other_kinds.empty()) message += " (it has " + other_kinds + " results)";
  throw ValueError(message);
}

std::vector<const KernelEntry*> KernelRegistry::entries() const {
  std::vector<const KernelEntry*> out;
  for (const KernelEntry& e : entries_) out.push_back(&e);
  return out;
}

void expect_operands(const KernelCall& call, size_t handles, size_t scalars, size_t memory) {
  const KernelOperands& o = call.operands;
  if (o.handles.size() == handles && o.scalars.size() == scalars && o.memory.size() == memory) {
    return;
  }
  auto counts = [](size_t h, size_t s, size_t m) {
    return std::to_string(h) + " arrays, " + std::to_string(s) + " scalars and " +
           std::to_string(m) + " in-memory operands";
  };
  throw ValueError("kernel '" + call.kernel + "': expected " + counts(handles, scalars, memory) +
                   ", got " + counts(o.handles.size(), o.scalars.size(), o.memory.size()));
}

// The op as users know it, for jask.stats(): a program's label ("sum",
// "mul+add"), otherwise the kernel's name ("matmul", "take").
std::string op_name(const KernelCall& call) {
  auto label = call.attrs.find("label");
  if (label != call.attrs.end()) {
    const auto* text = std::get_if<std::string>(&label->second);
    if (text != nullptr && !text->empty()) return *text;
  }
  return call.kernel;
}

KernelResult run_kernel(ResultKind kind, const KernelCall& call) {
  const KernelEntry& entry = KernelRegistry::instance().find(kind, call.kernel);
  // The turn first: a call holding pins never waits for one (an update_ waits for pins).
  BudgetTurn turn(program_bytes(call.program));
  // The readahead serves a loop of row reads only: other calls get its budget back.
  if (call.kernel != "rows" && call.kernel != "dynamic_slice") drop_readahead();
  CallStats stats(op_name(call), call.program, call.run);
  // One version of each operand for the whole call (see ReadPins).
  ReadPins pins(entry.pins == OperandPins::kPinned ? files_of_handles(call.operands.handles)
                                                   : files_of_handles({}));
  // Chunked operands hold their decoded-chunk caches out of the blocks' budget.
  ChunkReservation chunk_caches(call.operands.handles);
  return entry.run(call);
}

}  // namespace jask
