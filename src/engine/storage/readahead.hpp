// Readahead across engine calls for a loop walking an array's leading axis
// (`jask.rows(x, i * n, n)` for i = 0, 1, ...: a data loader, a layer loop):
// when a read continues the last one in the same file (or starts at the
// array's first element), the next reads of the same length are read in the
// background while the caller computes, and the next calls take them from memory.
//
// Bounds and invariants:
// - The next two reads at most, together at most three quarters of what the
//   budget leaves the calling call. A read over 8 MiB is held as parts of up
//   to 8 MiB, each read on its own thread: the caller copies each part as it
//   arrives, and each part taken starts the next one, so the disk stays busy
//   while the caller copies and computes (a loop over layers of a quarter of
//   the budget keeps more than a layer in flight). Parts' bytes are
//   reserved from the budget (reserve_budget) from the moment one is started
//   until it is dropped; a part taken leaves its buffer, still reserved, to the
//   loop's next part (already mapped and faulted in). So every call in between
//   plans its blocks without them and the budget stays a bound on everything held.
// - On by default (set_readahead_enabled): from a cold file it overlaps the
//   loop's reads with its compute; from the page cache it costs one more copy.
//   Parts go direct where the file system allows it, unless the read mode is
//   `buffered`: they run beside the caller's compute, and a buffered read
//   spends a core copying out of the page cache.
// - Never stale: a part is served only to a read of exactly its parts' bytes,
//   from the same File (an update_ by rename installs another), whose version
//   (File::version: this process's writes through it, the inode's size and
//   change times) is what it was before the part was read. Otherwise every
//   part is dropped and the read goes to the file.
// - Any other kernel call drops the parts first (run_kernel), giving their
//   budget back: only a loop of reads with nothing else in between engages it.
#pragma once
#include <cstdint>

#include "storage/array_store.hpp"

namespace jask {

// Elements [first, first + count) of `array` into dst, as StoredArray::read_elems,
// served from the parts held when they hold them (see above), then the
// parts moved on when this read continues a loop. Chunked arrays are read directly.
void read_elems_ahead(const StoredArray& array, void* dst, int64_t first, int64_t count);

// Frees the parts (waiting for their reads in flight) and their reservation.
void drop_readahead();
// On by default (_engine.set_readahead); off frees the parts and reads
// every range from the file.
void set_readahead_enabled(bool enabled);

struct ReadaheadStats {
  uint64_t started = 0;  // parts read (one per read up to 8 MiB)
  uint64_t served = 0;   // reads served from parts
  uint64_t dropped = 0;  // parts freed unused (another read, another call, a write)
  int64_t held_bytes = 0;
};
ReadaheadStats readahead_stats();

}  // namespace jask
