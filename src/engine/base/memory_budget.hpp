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
int64_t memory_budget();

}  // namespace jask
