// The memory budget as one bound for the process: engine calls take turns,
// block buffers are counted, and a jitted program's in-memory bytes are held
// back from the blocks of its calls (base/memory_budget.hpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "base/errors.hpp"
#include "base/memory_budget.hpp"
#include "io/file.hpp"
#include "program/reduction.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

constexpr int64_t kSlack = 64 << 10;  // page rounding of block buffers

TEST(MemoryBudget, ProgramSlotsKeepTheLargestFigureNoted) {
  const int32_t slot = new_program_slot();
  EXPECT_GT(slot, 0);
  EXPECT_EQ(program_bytes(slot), 0);
  note_program_bytes(slot, 5000);
  note_program_bytes(slot, 3000);
  EXPECT_EQ(program_bytes(slot), 5000);
  EXPECT_EQ(program_bytes(0), 0);  // eager calls name no program
  EXPECT_THROW(note_program_bytes(slot + 1000, 1), ValueError);
}

TEST(MemoryBudget, ATurnHoldsBackItsProgramsBytesUpToHalfTheBudget) {
  test::BudgetGuard budget(1 << 20);
  EXPECT_EQ(memory_budget(), 1 << 20);
  {
    BudgetTurn turn(100'000);
    EXPECT_EQ(total_memory_budget(), 1 << 20);
    EXPECT_EQ(program_reserve(), 100'000);
    EXPECT_EQ(memory_budget(), (1 << 20) - 100'000);
    EXPECT_EQ(budget_for_blocks(50'000), 100'000);  // 50'000 held of 100'000 leaves 50'000
    {
      BudgetTurn inner(0);  // a call inside the call keeps its program's hold
      EXPECT_EQ(program_reserve(), 100'000);
    }
    {
      BudgetTurn inner(10 << 20);
      EXPECT_EQ(program_reserve(), 1 << 19);  // at most half
    }
    EXPECT_EQ(program_reserve(), 100'000);
  }
  EXPECT_EQ(memory_budget(), 1 << 20);
}

TEST(MemoryBudget, BlockBuffersAreCountedWhileMapped) {
  const int64_t before = buffer_bytes();
  reset_peak_buffer_bytes();
  {
    AlignedBuffer a(10'000), b(4096);
    EXPECT_EQ(buffer_bytes() - before, 12288 + 4096);  // whole pages
  }
  EXPECT_EQ(buffer_bytes(), before);
  EXPECT_EQ(peak_buffer_bytes() - before, 12288 + 4096);
}

TEST(MemoryBudget, AKernelCallPlansInTheBudgetLessItsProgramsHold) {
  test::ScratchDir scratch;
  const int64_t budget = 256 << 10;
  test::BudgetGuard guard(budget);
  const std::vector<int64_t> shape = {611, 307};  // 733 KiB of float32: several blocks
  const int32_t x = test::make_array(DType::f32, shape, test::test_values(611 * 307));
  const int32_t slot = new_program_slot();
  note_program_bytes(slot, budget / 4);
  Attrs attrs = {{"reduction", static_cast<int64_t>(Reduction::kSum)},
                 {"axes", std::vector<int64_t>{0}}};
  for (int32_t program : {0, slot}) {
    reset_peak_buffer_bytes();
    KernelCall call;
    call.kernel = "reduce_axes";
    call.operands.handles = {x};
    call.attrs = attrs;
    call.program = program;
    const int32_t out = run_kernel(ResultKind::kArray, call).handles.at(0);
    Registry::instance().release_floating(out);
    const int64_t limit = budget - (program == 0 ? 0 : budget / 4) + kSlack;
    EXPECT_LE(peak_buffer_bytes(), limit) << "program slot " << program;
    EXPECT_GT(peak_buffer_bytes(), limit / 2) << "program slot " << program;
  }
}

}  // namespace
}  // namespace jask
