#include "plan/planner.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "base/errors.hpp"
#include "storage/hyperslab.hpp"

namespace jask {
namespace {

// Smallest block worth streaming: below this, per-call overhead dominates.
constexpr int64_t kMinBlockElems = 64;
// Blocks are multiples of this many elements so that every block of every
// dtype starts at a 4096-byte file offset (data offsets are 4096-aligned).
constexpr int64_t kAlignElems = 4096;
constexpr int64_t kMinTile = 8;
// The shallowest contraction tile worth trading for fewer reads (BLAS runs
// well below its peak on thinner panels).
constexpr int64_t kMinContraction = 256;
// Runs of a tile's rows shorter than this read well below the disk's rate:
// on this project's virtual disk, 3183 runs strided 1.3 MB apart, 32 in
// flight, direct: 36 KiB runs 0.7 GB/s, 128 KiB runs 1.3 GB/s (sequential).
constexpr int64_t kLongRunBytes = 128 << 10;

[[noreturn]] void budget_too_small(const std::string& op, const std::string& operands,
                                   int64_t needed) {
  const int64_t reserve = program_reserve();
  const std::string held = reserve > 0
                               ? " (" + std::to_string(reserve) + " of " +
                                     std::to_string(total_memory_budget()) +
                                     " are held for the in-memory buffers of jitted programs)"
                               : "";
  throw ValueError("memory budget of " + std::to_string(memory_budget()) + " bytes" + held +
                   " is too small for " + op + " on " + operands + ": it needs at least " +
                   std::to_string(needed) + " bytes; raise it with jask.set_memory_budget(" +
                   std::to_string(budget_for_blocks(needed)) + ")");
}

}  // namespace

int64_t plan_stream_block(const std::string& op, const std::string& operands, int64_t numel,
                          int64_t bytes_per_elem, int64_t resident_bytes, BlockBuffers buffers) {
  int64_t per_elem = bytes_per_elem * kPipelineSlots;
  int64_t min_block = std::max<int64_t>(1, std::min(numel, kMinBlockElems));
  const int64_t available = memory_budget() - resident_bytes;
  if (min_block * per_elem > available)
    budget_too_small(op, operands, min_block * per_elem + resident_bytes);
  // The largest block within `room` (0: none).
  auto block_within = [&](int64_t room) -> int64_t {
    if (min_block * per_elem > room) return 0;
    int64_t block = room / per_elem;
    if (block >= numel) return std::max<int64_t>(numel, 1);
    if (block >= kAlignElems) block = block / kAlignElems * kAlignElems;
    return std::max(block, min_block);
  };
  const int64_t page = static_cast<int64_t>(kIoAlignment);
  const int64_t slack = kPipelineSlots * buffers.slack_pages * page;
  // Element sizes are powers of two: a multiple of a page's smallest elements is whole pages.
  const int64_t unit = page / std::clamp<int64_t>(buffers.min_itemsize, 1, page);
  if (const int64_t block = block_within(available - slack); block > 0) {
    if (block % unit == 0) return block;
    if (block > unit && block < numel) return block / unit * unit;
  }
  if (const int64_t block = block_within(available - slack - kPipelineSlots * buffers.count * page);
      block > 0)
    return block;
  return block_within(available);
}

int64_t units_within(int64_t room, int64_t per_unit, int64_t buffers) {
  per_unit = std::max<int64_t>(per_unit, 1);
  const int64_t pages = buffers * static_cast<int64_t>(kIoAlignment);
  return room - pages >= per_unit ? (room - pages) / per_unit : room / per_unit;
}

int64_t mapped_bytes(int64_t bytes, int64_t n) {
  const int64_t page = static_cast<int64_t>(kIoAlignment);
  return n * ((bytes + page - 1) / page * page);
}

bool stream_fits(int64_t numel, int64_t bytes_per_elem, int64_t resident_bytes) {
  const int64_t min_block = std::max<int64_t>(1, std::min(numel, kMinBlockElems));
  return min_block * bytes_per_elem * kPipelineSlots <= memory_budget() - resident_bytes;
}

std::vector<int64_t> plan_transpose_tile(const std::string& operands,
                                         const std::vector<int64_t>& shape,
                                         const std::vector<int64_t>& perm, int64_t itemsize) {
  const size_t nd = shape.size();
  std::vector<int64_t> ext(nd, 1);
  if (nd == 0) return ext;
  // Input and output tiles, double-buffered.
  int64_t per_elem = itemsize * 2 * kPipelineSlots;
  // An input and an output tile in every slot.
  int64_t cap = units_within(memory_budget(), per_elem, 2 * kPipelineSlots);
  size_t last_in = nd - 1;
  size_t last_out = static_cast<size_t>(perm[nd - 1]);
  int64_t min_elems = std::min(shape[last_in], kMinTile) * std::min(shape[last_out], kMinTile);
  if (cap < min_elems) budget_too_small("transpose", operands, min_elems * per_elem);
  auto grow = [&](size_t axis, int64_t room) {
    int64_t others = 1;
    for (size_t i = 0; i < nd; ++i)
      if (i != axis) others *= ext[i];
    ext[axis] = std::max<int64_t>(1, std::min(shape[axis], std::min(room, cap / others)));
  };
  if (last_in == last_out) {
    grow(last_in, cap);
  } else {
    // Square-ish tiles keep both the input runs and the output runs long.
    int64_t side = static_cast<int64_t>(std::sqrt(static_cast<double>(cap)));
    grow(last_in, side);
    grow(last_out, cap);
    grow(last_in, cap);
  }
  for (size_t i = nd; i-- > 0;) {
    if (i != last_in && i != last_out) grow(i, cap);
  }
  return ext;
}

int64_t matmul_tile_bytes(const MatmulTiles& t, int64_t elem_bytes) {
  const int64_t c_rows = t.strip_rows > 0 ? t.strip_rows : t.mb;
  const int64_t a_bytes =
      t.a_in_place ? std::max(t.mb * t.kb * elem_bytes, in_place_bytes(t.mb, t.kb * elem_bytes))
                   : t.mb * t.kb * elem_bytes;
  return kPipelineSlots * (a_bytes + t.kb * t.nb * elem_bytes) +
         t.c_slots * c_rows * t.nb * elem_bytes;
}

namespace {

// The whole-C plan `whole` reads A in runs of whole.kb elements, one per row.
// Where those are short, a strip plan reads the same bytes (A and B once) in
// runs of kLongRunBytes: A's tiles take fewer rows and a deeper contraction,
// all of C stays in one buffer, and each K tile of B is read once for all
// of A's row tiles, each row read in place (a_in_place). Returns `whole`
// where no strip of kMinTile rows fits.
MatmulTiles strip_plan(const MatmulTiles& whole, int64_t k, int64_t elem_bytes, int64_t budget) {
  if (whole.kb >= k || whole.kb * elem_bytes >= kLongRunBytes) return whole;
  MatmulTiles strip{1, std::min(k, kLongRunBytes / elem_bytes), whole.nb, 1, whole.mb, true};
  // in_place_bytes(rows, run) = rows * (run + row_pad) + page
  const int64_t page = in_place_bytes(0, 0), row_pad = in_place_bytes(1, 0) - page;
  const int64_t room = budget -
                       (whole.mb * whole.nb + kPipelineSlots * strip.kb * strip.nb) * elem_bytes -
                       kPipelineSlots * page;
  strip.mb = std::min(whole.mb, room / (kPipelineSlots * (strip.kb * elem_bytes + row_pad)));
  if (strip.mb < std::min(whole.mb, kMinTile) || matmul_tile_bytes(strip, elem_bytes) > budget)
    return whole;
  return strip;
}

}  // namespace

MatmulTiles plan_matmul(const std::string& operands, int64_t m, int64_t k, int64_t n,
                        int64_t elem_bytes, int64_t count, bool a_rows_along_k) {
  int64_t cap = memory_budget() / (kPipelineSlots * elem_bytes);  // elements across A, B, C tiles
  MatmulTiles t{std::min(m, kMinTile), std::min(k, kMinTile), std::min(n, kMinTile)};
  t.mb = std::max<int64_t>(t.mb, 1);
  t.kb = std::max<int64_t>(t.kb, 1);
  t.nb = std::max<int64_t>(t.nb, 1);
  auto used = [&] { return t.mb * t.kb + t.kb * t.nb + t.mb * t.nb; };
  if (used() > cap) budget_too_small("matmul", operands, matmul_tile_bytes(t, elem_bytes));
  // The least tiles always fit; larger ones leave the bounce buffers' share and each tile
  // buffer's last page (A, B and C tiles in every slot: whole pages each).
  const int64_t pages = 3 * kPipelineSlots * static_cast<int64_t>(kIoAlignment);
  const int64_t tiles_room = memory_budget() - slab_bounce_reserve() -
                             (memory_budget() - slab_bounce_reserve() > 2 * pages ? pages : 0);
  cap = std::max(used(), tiles_room / (kPipelineSlots * elem_bytes));
  // Start square, then let B's tile grow to all of B (read B once), then
  // spend the rest on taller row panels of A.
  int64_t side = static_cast<int64_t>(std::sqrt(static_cast<double>(cap) / 3.0));
  t.mb = std::max(t.mb, std::min(m, side));
  t.kb = std::max(t.kb, std::min(k, side));
  t.nb = std::max(t.nb, std::min(n, side));
  while (used() > cap) {  // sqrt rounding
    if (t.mb >= t.kb && t.mb >= t.nb && t.mb > 1)
      --t.mb;
    else if (t.kb >= t.nb && t.kb > 1)
      --t.kb;
    else
      --t.nb;
  }
  // grow one extent as far as the budget allows, the others fixed; extents
  // stay >= 1 even for an empty dimension (callers divide by them)
  auto fit = [](int64_t dim, int64_t cur, int64_t room) {
    return std::max<int64_t>(1, std::min(dim, std::max(cur, room)));
  };
  auto grow_nb = [&] { t.nb = fit(n, t.nb, (cap - t.mb * t.kb) / (t.kb + t.mb)); };
  auto grow_kb = [&] { t.kb = fit(k, t.kb, (cap - t.mb * t.nb) / (t.mb + t.nb)); };
  auto grow_mb = [&] { t.mb = fit(m, t.mb, (cap - t.kb * t.nb) / (t.kb + t.nb)); };
  grow_kb();
  grow_nb();
  grow_mb();
  grow_kb();
  grow_nb();
  // Each A tile is read once per column of C tiles and each B tile once per
  // row: when all of C fits in half the budget with a deep enough
  // contraction tile, keeping C whole reads A and B exactly once.
  auto traffic = [&](const MatmulTiles& p) {
    return static_cast<double>(m) * k * ((n + p.nb - 1) / p.nb) +
           static_cast<double>(k) * n * ((m + p.mb - 1) / p.mb);
  };
  // A single C tile needs one buffer, which leaves deeper A and B tiles and
  // lets C have half of the whole budget.
  const bool one_c_tile = count == 1;
  auto in_long_runs = [&](const MatmulTiles& whole_c) {
    const int64_t room = tiles_room;
    return a_rows_along_k ? strip_plan(whole_c, k, elem_bytes, room) : whole_c;
  };
  if (m * n <= (one_c_tile ? kPipelineSlots * cap : cap) / 2) {
    MatmulTiles whole{std::max<int64_t>(m, 1), 1, std::max<int64_t>(n, 1)};
    const int64_t c_elems = whole.mb * whole.nb;
    whole.c_slots = one_c_tile ? 1 : kPipelineSlots;
    const int64_t ab_room = one_c_tile ? cap - c_elems / kPipelineSlots : cap - c_elems;
    whole.kb = fit(k, 1, ab_room / (whole.mb + whole.nb));
    const bool fits = matmul_tile_bytes(whole, elem_bytes) <= tiles_room;  // kb >= 1 may not
    if (fits && whole.kb >= std::min<int64_t>(k, kMinContraction) && traffic(whole) < traffic(t))
      return one_c_tile ? in_long_runs(whole) : whole;
  }
  if (one_c_tile && t.mb >= m && t.nb >= n) {
    t.c_slots = 1;
    return in_long_runs(t);
  }
  return t;
}

}  // namespace jask
