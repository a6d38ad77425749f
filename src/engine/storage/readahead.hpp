// Readahead across engine calls for a loop walking an array's leading axis
// (`jask.rows(x, i * n, n)` for i = 0, 1, ...: a data loader, a layer loop):
// when a read continues the last one in the same file, the next range of the
// same length is read in the background while the caller computes, and the
// next call takes it from memory.
//
// Bounds and invariants:
// - Two windows at most (the next two reads), together at most half of what
//   the budget leaves the calling call (a loop over layers of a quarter of the
//   budget gets one). Their bytes are reserved from the budget
//   (reserve_budget) from the moment one is started until it is dropped; a
//   window taken leaves its buffer, still reserved, to the loop's next window
//   (already mapped and faulted in). So every call in between plans its
//   blocks without them and the budget stays a bound on everything held.
// - On by default (set_readahead_enabled): from a cold file it overlaps the
//   loop's reads with its compute; from the page cache it costs one more copy.
// - Never stale: the window is served only to a read of exactly its bytes,
//   from the same File (an update_ by rename installs another), whose version
//   (File::version: this process's writes through it, the inode's size and
//   change times) is what it was before the window was read. Otherwise it is
//   dropped and the read goes to the file.
// - Any other kernel call drops the window first (run_kernel), giving its
//   budget back: only a loop of reads with nothing else in between engages it.
#pragma once
#include <cstdint>

#include "storage/array_store.hpp"

namespace jask {

// Elements [first, first + count) of `array` into dst, as StoredArray::read_elems,
// served from the first window when it holds them (see above), then the
// windows moved on when this read continues the last one. Chunked arrays are read directly.
void read_elems_ahead(const StoredArray& array, void* dst, int64_t first, int64_t count);

// Frees the windows (waiting for their reads in flight) and their reservation.
void drop_readahead();
// On by default (_engine.set_readahead); off frees the windows and reads
// every range from the file.
void set_readahead_enabled(bool enabled);

struct ReadaheadStats {
  uint64_t started = 0;  // windows read
  uint64_t served = 0;   // reads served from a window
  uint64_t dropped = 0;  // windows freed unused (another read, another call, a write)
  int64_t held_bytes = 0;
};
ReadaheadStats readahead_stats();

}  // namespace jask
