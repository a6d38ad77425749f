// Block planning: every plan fits the memory budget, and a budget too small
// for any plan is refused with a message that says what would work.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "base/errors.hpp"
#include "plan/planner.hpp"
#include "storage/hyperslab.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::BudgetGuard;

const std::vector<int64_t> kBudgets = {kMinBudget, 4096, 6000, 16384, 100000, 1 << 20, 256 << 20};

// A refusal must ask for more than the current budget, and what it asks for
// must be enough: `plan` succeeds once the budget is raised to it.
template <class Plan>
void check_refusal_advice(const ValueError& refusal, Plan plan) {
  int64_t needed = test::needed_budget_in(refusal.what());
  ASSERT_GT(needed, memory_budget()) << refusal.what();
  BudgetGuard raised(needed);
  EXPECT_NO_THROW(plan()) << "the budget asked for, " << needed << ", is not enough";
}

TEST(Planner, BudgetBelowTheMinimumIsRejected) {
  BudgetGuard guard(1 << 20);
  EXPECT_THROW(set_memory_budget(kMinBudget - 1), ValueError);
  EXPECT_THROW(set_memory_budget(0), ValueError);
  EXPECT_THROW(set_memory_budget(-4096), ValueError);
  EXPECT_THROW(set_memory_budget(kMaxBudget + 1), ValueError);
  EXPECT_EQ(memory_budget(), 1 << 20) << "a rejected budget must not change the current one";
  set_memory_budget(kMinBudget);
  EXPECT_EQ(memory_budget(), kMinBudget);
  set_memory_budget(kMaxBudget);
  EXPECT_EQ(memory_budget(), kMaxBudget);
}

TEST(Planner, StreamBlockFitsTheBudget) {
  for (int64_t budget : kBudgets) {
    BudgetGuard guard(budget);
    for (int64_t bytes_per_elem : {2, 4, 8, 12, 16}) {
      for (int64_t numel : {1, 100, 256, 1000, 4097, 100003, 1 << 30}) {
        auto plan = [&] { return plan_stream_block("op", "operands", numel, bytes_per_elem); };
        int64_t block;
        try {
          block = plan();
        } catch (const ValueError& e) {
          check_refusal_advice(e, plan);
          continue;
        }
        SCOPED_TRACE("budget " + std::to_string(budget) + ", " + std::to_string(bytes_per_elem) +
                     " bytes/elem, " + std::to_string(numel) + " elements");
        EXPECT_GE(block, 1);
        EXPECT_LE(block, numel);
        EXPECT_LE(kPipelineSlots * block * bytes_per_elem, budget);
      }
    }
  }
}

// Block buffers are mapped in whole pages, and a read buffer keeps a page
// more: the pages of every buffer, not only their elements, fit budgets that
// hold a page per buffer (before, up to two pages per buffer went over).
TEST(Planner, StreamBlockBuffersFitTheBudgetInWholePages) {
  const int64_t page = static_cast<int64_t>(kIoAlignment);
  struct Streams {
    std::vector<int64_t> in, out;  // element sizes; each input buffer has a page of slack
  };
  for (const Streams& streams :
       {Streams{{4}, {}}, Streams{{4, 8}, {4}}, Streams{{2, 2, 1}, {2}}, Streams{{8}, {8, 8}}}) {
    int64_t per_elem = 0, least = 8;
    for (const auto* sizes : {&streams.in, &streams.out})
      for (int64_t size : *sizes) per_elem += size, least = std::min(least, size);
    const auto n_in = static_cast<int64_t>(streams.in.size());
    const BlockBuffers buffers{n_in + static_cast<int64_t>(streams.out.size()), n_in, least};
    for (int64_t budget : {int64_t{100000}, int64_t{200000}, int64_t{1} << 20, int64_t{1000001}}) {
      BudgetGuard guard(budget);
      for (int64_t numel : {1000, 4097, 30011, 100003, 1 << 30}) {
        const int64_t block = plan_stream_block("op", "x", numel, per_elem, 0, buffers);
        int64_t mapped = 0;
        for (int64_t size : streams.in) mapped += mapped_bytes(block * size + page, kPipelineSlots);
        for (int64_t size : streams.out) mapped += mapped_bytes(block * size, kPipelineSlots);
        EXPECT_LE(mapped, budget) << "budget " << budget << ", " << per_elem << " bytes/elem, "
                                  << numel << " elements: blocks of " << block;
        EXPECT_GE(block, std::min<int64_t>(numel, 1024)) << "the pages left room for few elements";
      }
    }
  }
}

TEST(Planner, StreamBlockIsTheWholeArrayWhenItFits) {
  BudgetGuard guard(1 << 20);
  const int64_t bytes_per_elem = 8;
  const int64_t fits = (1 << 20) / (kPipelineSlots * bytes_per_elem);
  for (int64_t numel : {int64_t{1}, int64_t{300}, fits}) {
    EXPECT_EQ(plan_stream_block("op", "x", numel, bytes_per_elem), numel);
  }
  EXPECT_LT(plan_stream_block("op", "x", fits + 1, bytes_per_elem), fits + 1);
}

TEST(Planner, StreamBlockOfAnEmptyArrayIsOneElement) {
  BudgetGuard guard(kMinBudget);
  EXPECT_EQ(plan_stream_block("op", "x", 0, 16), 1);
}

TEST(Planner, LargeStreamBlocksAreMultiplesOf4096Elements) {
  // Then every block of every dtype starts on a 4096-byte file offset.
  for (int64_t budget :
       {int64_t{1} << 20, int64_t{3} << 20, int64_t{1000000}, int64_t{256} << 20}) {
    BudgetGuard guard(budget);
    for (int64_t bytes_per_elem : {2, 4, 12}) {
      int64_t block = plan_stream_block("op", "x", int64_t{1} << 34, bytes_per_elem);
      ASSERT_GE(block, 4096);
      EXPECT_EQ(block % 4096, 0) << "budget " << budget << ", " << bytes_per_elem << " bytes/elem";
    }
  }
}

TEST(Planner, StreamBlockRefusalNamesTheOpOperandsAndNeededBudget) {
  BudgetGuard guard(kMinBudget);
  // One element in two slots already exceeds the budget, so the smallest
  // budget that works is exactly that.
  const int64_t bytes_per_elem = kMinBudget;
  const int64_t needed = kPipelineSlots * bytes_per_elem;
  try {
    plan_stream_block("vdot", "float64[1] . float64[1]", 1, bytes_per_elem);
    ADD_FAILURE() << "a budget of " << kMinBudget << " bytes was accepted";
  } catch (const ValueError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("vdot"), std::string::npos) << msg;
    EXPECT_NE(msg.find("float64[1] . float64[1]"), std::string::npos) << msg;
    EXPECT_EQ(test::needed_budget_in(msg), needed) << msg;
    EXPECT_NE(msg.find(std::to_string(kMinBudget) + " bytes"), std::string::npos)
        << "current budget: " << msg;
  }
  set_memory_budget(needed);
  EXPECT_EQ(plan_stream_block("add", "x", 1, bytes_per_elem), 1);
}

TEST(Planner, SmallArraysNeedOnlyTheirOwnSize) {
  BudgetGuard guard(4096);
  // 10 elements x 2 slots x 200 bytes fit 4096 bytes; a larger minimum
  // block would not.
  EXPECT_EQ(plan_stream_block("op", "x", 10, 200), 10);
}

const std::vector<int64_t> kMatmulDims = {1, 2, 7, 37, 100, 1000, 100000};

TEST(Planner, MatmulTilesFitTheBudget) {
  for (int64_t budget : kBudgets) {
    BudgetGuard guard(budget);
    for (int64_t elem_bytes : {4, 8}) {
      for (int64_t m : kMatmulDims) {
        for (int64_t k : kMatmulDims) {
          for (int64_t n : kMatmulDims) {
            for (auto [count, along_k] : {std::pair{1, false}, {1, true}, {3, true}}) {
              auto plan = [&] { return plan_matmul("mm", m, k, n, elem_bytes, count, along_k); };
              MatmulTiles t;
              try {
                t = plan();
              } catch (const ValueError& e) {
                check_refusal_advice(e, plan);
                continue;
              }
              SCOPED_TRACE("budget " + std::to_string(budget) + ", M K N = " + std::to_string(m) +
                           " " + std::to_string(k) + " " + std::to_string(n) + ", count " +
                           std::to_string(count));
              ASSERT_LE(matmul_tile_bytes(t, elem_bytes), budget);
              ASSERT_TRUE(t.mb >= 1 && t.mb <= m);
              ASSERT_TRUE(t.kb >= 1 && t.kb <= k);
              ASSERT_TRUE(t.nb >= 1 && t.nb <= n);
              ASSERT_TRUE(t.c_slots == kPipelineSlots ||
                          (count == 1 && (t.mb >= m || t.strip_rows >= m) && t.nb >= n));
              if (t.strip_rows > 0) {  // one product, A along K, all of C in one buffer
                ASSERT_TRUE(count == 1 && along_k && t.c_slots == 1);
                ASSERT_EQ(t.strip_rows, std::max<int64_t>(m, 1));
              }
            }
          }
        }
      }
    }
  }
}

// W3 of the benchmark under its cap: x (3183 x 327680) @ w (327680 x 256) at
// 256 MiB. All of C fits, so A and B are read once either way; A's tiles are
// read in runs of 128 KiB or more instead of about 38 KiB.
TEST(Planner, MatmulReadsADeepContractionInLongRuns) {
  BudgetGuard guard(256 << 20);
  const int64_t m = 3183, k = 327680, n = 256;
  MatmulTiles whole = plan_matmul("mm", m, k, n, 4, 1, /*a_rows_along_k=*/false);
  EXPECT_EQ(whole.strip_rows, 0);
  EXPECT_EQ(whole.mb, m);
  EXPECT_LT(whole.kb * 4, 64 << 10);
  MatmulTiles strip = plan_matmul("mm", m, k, n, 4, 1, true);
  EXPECT_EQ(strip.strip_rows, m);
  EXPECT_EQ(strip.nb, n);
  EXPECT_GE(strip.kb * 4, 128 << 10);
  EXPECT_GE(strip.mb, 256);  // rows enough for BLAS at its rate
  EXPECT_TRUE(strip.a_in_place);
  EXPECT_LE(matmul_tile_bytes(strip, 4), memory_budget());
  EXPECT_FALSE(whole.a_in_place);
  // one product only: batches keep the tiled order
  EXPECT_EQ(plan_matmul("mm", m, k, n, 4, 2, true).strip_rows, 0);
}

TEST(Planner, MatmulTilesOfEmptyDimensionsAreStillAtLeastOne) {
  // Callers divide by the tile extents.
  BudgetGuard guard(1 << 20);
  for (auto [m, k, n] :
       {std::tuple<int64_t, int64_t, int64_t>{0, 5, 4}, {3, 0, 4}, {3, 5, 0}, {0, 0, 0}}) {
    MatmulTiles t = plan_matmul("mm", m, k, n, 4);
    EXPECT_GE(t.mb, 1);
    EXPECT_GE(t.kb, 1);
    EXPECT_GE(t.nb, 1);
  }
}

TEST(Planner, MatmulTileBytesCountsEveryTileInEverySlot) {
  MatmulTiles t{3, 5, 7};
  EXPECT_EQ(matmul_tile_bytes(t, 4), kPipelineSlots * (3 * 5 + 5 * 7 + 3 * 7) * 4);
  MatmulTiles one_c{3, 5, 7, /*c_slots=*/1};
  EXPECT_EQ(matmul_tile_bytes(one_c, 4), (kPipelineSlots * (3 * 5 + 5 * 7) + 3 * 7) * 4);
  MatmulTiles strip{3, 5, 7, /*c_slots=*/1, /*strip_rows=*/40};
  EXPECT_EQ(matmul_tile_bytes(strip, 4), (kPipelineSlots * (3 * 5 + 5 * 7) + 40 * 7) * 4);
  strip.a_in_place = true;  // A's slots hold the pages around each row
  EXPECT_EQ(matmul_tile_bytes(strip, 4),
            kPipelineSlots * (in_place_bytes(3, 5 * 4) + 5 * 7 * 4) + 40 * 7 * 4);
}

TEST(Planner, MatmulKeepsASmallBFullyResident) {
  BudgetGuard guard(1 << 20);
  for (auto [m, k, n] :
       {std::tuple<int64_t, int64_t, int64_t>{10000, 20, 30}, {100000, 64, 64}, {5000, 1, 100}}) {
    MatmulTiles t = plan_matmul("mm", m, k, n, 4);
    EXPECT_EQ(t.kb, k) << m << "x" << k << "x" << n;
    EXPECT_EQ(t.nb, n) << m << "x" << k << "x" << n;
    EXPECT_LE(matmul_tile_bytes(t, 4), 1 << 20);
  }
}

TEST(Planner, MatmulTakesEverythingWhenItAllFits) {
  BudgetGuard guard(1 << 20);
  MatmulTiles t = plan_matmul("mm", 40, 30, 20, 8);
  EXPECT_EQ(t.mb, 40);
  EXPECT_EQ(t.kb, 30);
  EXPECT_EQ(t.nb, 20);
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

TEST(Planner, TransposeTilesFitTheBudget) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{37, 23}, {1, 0}},           {{37, 23}, {0, 1}},
      {{1000, 1000}, {1, 0}},       {{1, 100000}, {1, 0}},
      {{5, 7, 9}, {2, 0, 1}},       {{5, 7, 9}, {0, 2, 1}},
      {{64, 64, 64}, {1, 0, 2}},    {{300, 2, 500}, {2, 1, 0}},
      {{3, 4, 5, 6}, {3, 1, 0, 2}}, {{7}, {0}},
  };
  for (int64_t budget : kBudgets) {
    BudgetGuard guard(budget);
    for (int64_t isz : {2, 4, 8}) {
      for (const auto& [shape, perm] : cases) {
        auto plan = [&] { return plan_transpose_tile("t", shape, perm, isz); };
        std::vector<int64_t> ext;
        try {
          ext = plan();
        } catch (const ValueError& e) {
          check_refusal_advice(e, plan);
          continue;
        }
        ASSERT_EQ(ext.size(), shape.size());
        SCOPED_TRACE("budget " + std::to_string(budget) + ", itemsize " + std::to_string(isz) +
                     ", shape[0] " + std::to_string(shape[0]));
        // Input and output tiles, each in every pipeline slot.
        EXPECT_LE(product(ext) * isz * 2 * kPipelineSlots, budget);
        for (size_t d = 0; d < shape.size(); ++d) {
          EXPECT_GE(ext[d], 1);
          EXPECT_LE(ext[d], shape[d]);
        }
      }
    }
  }
}

TEST(Planner, TransposeTileCoversASmallArrayWhole) {
  BudgetGuard guard(1 << 20);
  std::vector<int64_t> shape = {5, 7, 9};
  EXPECT_EQ(plan_transpose_tile("t", shape, {2, 0, 1}, 4), shape);
}

TEST(Planner, ZeroDimensionalTransposeTileIsEmpty) {
  EXPECT_TRUE(plan_transpose_tile("t", {}, {}, 4).empty());
}

}  // namespace
}  // namespace jask

namespace jask {
namespace {

TEST(Planner, MatmulKeepsAllOfCWhenThatReadsEachOperandOnce) {
  // W3's shape: C (4096 x 2560) is 40 MiB of a 256 MiB budget; square tiles would read B twice.
  BudgetGuard guard(int64_t{256} << 20);
  MatmulTiles t = plan_matmul("mm", 4096, 32768, 2560, 4);
  EXPECT_EQ(t.mb, 4096);
  EXPECT_EQ(t.nb, 2560);
  EXPECT_GE(t.kb, 256);
  EXPECT_LE(matmul_tile_bytes(t, 4), int64_t{256} << 20);
  // One product: C is one tile, written once, so one C buffer and deeper A and B tiles.
  EXPECT_EQ(t.c_slots, 1);
  MatmulTiles batched = plan_matmul("mm", 4096, 32768, 2560, 4, /*count=*/3);
  EXPECT_EQ(batched.c_slots, kPipelineSlots);
  EXPECT_GT(t.kb, batched.kb);
  EXPECT_LE(matmul_tile_bytes(batched, 4), int64_t{256} << 20);
  // W3 at 4 GiB: C is 80 MiB, more than half of one slot's share but less than half the budget;
  // a single C buffer still leaves room for A and B tiles, so both are read once.
  MatmulTiles w3_4g = plan_matmul("mm", 8192, 32768, 2560, 4);
  EXPECT_EQ(w3_4g.mb, 8192);
  EXPECT_EQ(w3_4g.nb, 2560);
  EXPECT_EQ(w3_4g.c_slots, 1);
  EXPECT_GE(w3_4g.kb, 256);
  EXPECT_LE(matmul_tile_bytes(w3_4g, 4), int64_t{256} << 20);
  // Too large a C for that: tiles as before, every extent inside its dimension.
  MatmulTiles big = plan_matmul("mm", 40000, 32768, 40000, 4);
  EXPECT_LT(big.mb, 40000);
  EXPECT_LE(matmul_tile_bytes(big, 4), int64_t{256} << 20);
}

}  // namespace
}  // namespace jask
