#include "base/memory_budget.hpp"

#include <atomic>
#include <string>

#include "base/errors.hpp"

namespace jask {
namespace {

std::atomic<int64_t> g_budget{256LL << 20};

}  // namespace

void set_memory_budget(int64_t bytes) {
  if (bytes < kMinBudget || bytes > kMaxBudget) {
    throw ValueError("memory budget must be between " + std::to_string(kMinBudget) + " and " +
                     std::to_string(kMaxBudget) + " bytes (2**60), got " + std::to_string(bytes));
  }
  g_budget = bytes;
}

int64_t memory_budget() { return g_budget; }

}  // namespace jask
