// Rows of several arrays written in place as one step: the row-sparse
// optimizer's update (jask.row_sparse), which changes only the rows a batch
// touched of a table and of its optimizer state. A crash cannot tear the
// step and readers in this process never see half of it:
//  - the rows of a lasting file (not scratch) go first to its journal
//    (storage/journal.hpp, one run per run of adjacent rows), which is
//    flushed before anything is written in place and replayed by the next
//    open after a crash;
//  - scratch arrays die with the process, so they are written without one;
//  - every file's readers are held back (SharedFile::with_readers_held)
//    while the rows of all of them are written.
// At most one array may be a lasting file (the journal commits one file at
// a time); no two may share a file.
#pragma once
#include <cstdint>
#include <vector>

#include "storage/array_store.hpp"

namespace jask {

// Writes rows `rows` (ascending, distinct, in [0, n) for the arrays' common
// leading length n) of each of `arrays`: row rows[i] of arrays[k] becomes
// row i of values[k], which holds rows.size() (or more: the rest is ignored)
// rows of arrays[k]'s row size, `value_bytes[k]` bytes in all.
void write_rows(const std::vector<ArrayRef>& arrays, const std::vector<int64_t>& rows,
                const std::vector<const void*>& values, const std::vector<uint64_t>& value_bytes);

}  // namespace jask
