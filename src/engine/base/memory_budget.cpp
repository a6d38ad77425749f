#include "base/memory_budget.hpp"

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <string>

#include "base/errors.hpp"

namespace jask {
namespace {

std::atomic<int64_t> g_budget{256LL << 20};
std::recursive_mutex g_turn;
// The program bytes of the call holding the turn (set and read under it).
std::atomic<int64_t> g_held{0};
// Bytes reserved for chunk caches by the call holding the turn.
std::atomic<int64_t> g_reserved{0};

std::mutex g_slots_mu;
std::deque<int64_t> g_slots{0};  // slot 0: no program (eager calls)

}  // namespace

void set_memory_budget(int64_t bytes) {
  if (bytes < kMinBudget || bytes > kMaxBudget) {
    throw ValueError("memory budget must be between " + std::to_string(kMinBudget) + " and " +
                     std::to_string(kMaxBudget) + " bytes (2**60), got " + std::to_string(bytes));
  }
  g_budget = bytes;
}

int64_t total_memory_budget() { return g_budget; }
int64_t program_reserve() { return std::min<int64_t>(g_held, g_budget / 2); }
int64_t memory_budget() { return g_budget - program_reserve() - g_reserved; }
void reserve_budget(int64_t bytes) { g_reserved += bytes; }
void unreserve_budget(int64_t bytes) { g_reserved -= bytes; }
int64_t reserved_budget() { return g_reserved; }
int64_t budget_for_blocks(int64_t needed) {
  return needed + std::min<int64_t>(g_held, needed) + g_reserved;
}

int32_t new_program_slot() {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  g_slots.push_back(0);
  return static_cast<int32_t>(g_slots.size() - 1);
}

void note_program_bytes(int32_t slot, int64_t bytes) {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  if (slot <= 0 || static_cast<size_t>(slot) >= g_slots.size())
    throw ValueError("no jitted program slot " + std::to_string(slot));
  g_slots[static_cast<size_t>(slot)] = std::max(g_slots[static_cast<size_t>(slot)], bytes);
}

int64_t program_bytes(int32_t slot) {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  if (slot < 0 || static_cast<size_t>(slot) >= g_slots.size()) return 0;
  return g_slots[static_cast<size_t>(slot)];
}

int64_t largest_program_bytes() {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  return *std::max_element(g_slots.begin(), g_slots.end());
}

BudgetTurn::BudgetTurn(int64_t program_bytes) {
  g_turn.lock();
  saved_ = g_held;
  g_held = std::max(saved_, program_bytes);
}

BudgetTurn::~BudgetTurn() {
  g_held = saved_;
  g_turn.unlock();
}

}  // namespace jask
