// The memory budget and block planning. Every buffer an op allocates is
// counted against the budget: (slots) x (block bytes of every stream).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/memory_budget.hpp"

namespace jask {

// Slots per stream: one being filled or drained by I/O, one being computed.
inline constexpr int64_t kPipelineSlots = 2;

// The block buffers of a streaming op, per pipeline slot: each is whole pages
// (io/file.hpp's AlignedBuffer maps pages), and `slack_pages` more pages in
// all let reads land at their file offset's alignment. Their elements are
// `min_itemsize` bytes or a power-of-two multiple of it.
struct BlockBuffers {
  int64_t count = 1;
  int64_t slack_pages = 0;
  int64_t min_itemsize = 1;
};

// Bytes of `n` buffers of `bytes` each once mapped: whole pages.
int64_t mapped_bytes(int64_t bytes, int64_t n = 1);

// How many units (rows, elements) of `per_unit` bytes in all fit `room`
// bytes when they are held in `buffers` buffers, each mapped in whole pages:
// a page per buffer is left for its last one, where `room` has that; a
// budget of a few pages gets room / per_unit.
int64_t units_within(int64_t room, int64_t per_unit, int64_t buffers);

// Elements per block for a streaming op whose streams need `bytes_per_elem`
// bytes per element in total (inputs + outputs). Throws ValueError naming
// the op, the operands and the smallest budget that works.
// `resident_bytes` are already taken from the budget by operands kept whole.
// The buffers' pages fit the budget with the elements (a block of a page of
// the smallest elements or a multiple fills whole pages in every buffer; a
// smaller one leaves room for each buffer's last page), down to budgets of a
// few pages: below, a block of the fewest elements takes a page per buffer
// whatever the budget.
int64_t plan_stream_block(const std::string& op, const std::string& operands, int64_t numel,
                          int64_t bytes_per_elem, int64_t resident_bytes = 0,
                          BlockBuffers buffers = {});

// Whether plan_stream_block would find a block within the budget.
bool stream_fits(int64_t numel, int64_t bytes_per_elem, int64_t resident_bytes = 0);

// Tile extents per axis for a blocked transposition of `shape` by `perm`.
std::vector<int64_t> plan_transpose_tile(const std::string& operands,
                                         const std::vector<int64_t>& shape,
                                         const std::vector<int64_t>& perm, int64_t itemsize);

struct MatmulTiles {
  int64_t mb, kb, nb;
  // Buffers for C tiles: one when the whole product is one C tile (it is
  // written once, after the last task), else one per pipeline slot.
  int64_t c_slots = kPipelineSlots;
  // 0, or a strip plan's rows (all of M; nb is all of N): the tasks run
  // K tile by K tile, each over every row tile of A, into one C buffer of
  // strip_rows x nb; a K tile of B is read once, into slot k % kPipelineSlots.
  int64_t strip_rows = 0;
  // A's slots also hold the pages around each of its tile's rows
  // (in_place_bytes), so the rows are read from the file straight into the
  // tile (storage/hyperslab's read_slab_in_place) instead of through a bounce
  // buffer and a copy that would take the cores from BLAS.
  bool a_in_place = false;
};
// Tiles for `count` products C(M,N) = A(M,K) B(K,N) with elements of
// `elem_bytes` in memory. `a_rows_along_k`: A is stored M x K (not
// transposed), so a tile of A is one run in the file per row, kb long.
MatmulTiles plan_matmul(const std::string& operands, int64_t m, int64_t k, int64_t n,
                        int64_t elem_bytes, int64_t count = 1, bool a_rows_along_k = false);
// Bytes the tiles occupy in the pipeline.
int64_t matmul_tile_bytes(const MatmulTiles& t, int64_t elem_bytes);

}  // namespace jask
