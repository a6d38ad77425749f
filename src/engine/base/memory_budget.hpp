// The process-wide memory budget: every buffer an op allocates counts
// against it (plan/planner.hpp divides it into blocks).
#pragma once
#include <cstdint>

namespace jask {

inline constexpr int64_t kMinBudget = 1024;
// 1 EiB: beyond any machine's memory, and low enough that sums and small
// multiples of budget-sized blocks cannot overflow int64.
inline constexpr int64_t kMaxBudget = int64_t{1} << 60;

void set_memory_budget(int64_t bytes);
// The budget as the user set it.
int64_t total_memory_budget();
// What the running engine call may hold: the budget less what XLA holds in
// memory for the program making the call (program_reserve()) and the bytes
// reserved for chunk caches (reserve_budget()).
int64_t memory_budget();
// Bytes held back from memory_budget() for the running call: the decoded-chunk
// caches of its chunked operands (storage/chunked.hpp). Under the BudgetTurn.
void reserve_budget(int64_t bytes);
void unreserve_budget(int64_t bytes);
int64_t reserved_budget();
// The bytes of the budget held back for the running call's program: its
// in-memory bytes, up to half the budget (blocks always get the other half).
int64_t program_reserve();
// The smallest budget under which the running call gets `needed` bytes.
int64_t budget_for_blocks(int64_t needed);

// Jitted programs that call the engine. Each lowering of one gets a slot;
// once XLA has compiled it, the slot holds the bytes XLA keeps in memory
// while it runs (its temporaries and in-memory results, from the compiled
// memory analysis; the largest over every compilation that uses the slot).
// Its engine calls name the slot (KernelCall::program).
int32_t new_program_slot();
void note_program_bytes(int32_t slot, int64_t bytes);
int64_t program_bytes(int32_t slot);
// The largest figure of any slot: of every program compiled so far.
int64_t largest_program_bytes();

// The budget bounds everything Jask holds at once, not each call: engine calls
// (a kernel, an update_, a read into memory) take turns, one at a time per
// process, so calls from several threads, or the independent calls of one
// jitted program that XLA runs side by side, never hold two budgets' worth of
// buffers. Each call is parallel inside (readers, writers, BLAS threads). A
// thread that holds the turn may enter again (a call made inside a call).
// `program_bytes`: what the caller's program holds in memory meanwhile.
class BudgetTurn {
 public:
  explicit BudgetTurn(int64_t program_bytes = 0);
  ~BudgetTurn();
  BudgetTurn(const BudgetTurn&) = delete;
  BudgetTurn& operator=(const BudgetTurn&) = delete;

 private:
  int64_t saved_;
};

}  // namespace jask
