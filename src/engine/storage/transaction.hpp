// Several arrays replaced as one step that a crash cannot tear
// (jask.update_tree_): after a SIGKILL or power loss at any moment, the next
// open of any of the files sees every array old or every array new.
//
// Protocol, for the files that outlive the process (scratch files need none):
//  1. beside each target T, a pointer file T.jask-txn-<id>.ptr naming the
//     commit record, flock()ed while the writer lives; then the new file
//     T.jask-txn-<id>, built as update_ builds it; both fdatasync'ed, and
//     their folders fsync'ed;
//  2. the commit record J = T0.jask-txn-<id>.journal, listing (new file,
//     target) pairs, written as J.part, fdatasync'ed, renamed to J and its
//     folder fsync'ed: the commit point;
//  3. each new file renamed over its target, the folders fsync'ed; then J
//     and the pointers removed.
// Recovery (recover_transactions) starts from any target's pointer files: a
// pointer no live writer holds whose record exists is rolled forward (the
// renames of step 3 redone); one without a record is undone (its new file
// removed). Cost over update_ of each array: one small pointer file per
// file, one commit record and its fsync, and one fsync per folder.
#pragma once
#include <string>
#include <vector>

#include "storage/array_store.hpp"

namespace jask {

struct ArrayUpdate {
  ArrayRef target;
  std::string name;  // for messages (the leaf's path in the pytree)
  StoredArray::DataWriter write_data;
};

// Replaces every target's data as one step. Each target must be writable and
// its file appear once. Readers in other threads see each array all old or
// all new (ReadPins).
void replace_all(const std::vector<ArrayUpdate>& updates);

// Finishes or undoes the transactions of dead writers that involve the file
// at `target` (above). Rolling forward renames files in their folders: where
// that is refused, an IoError says how to finish it. Called at every open and
// update of a file.
void recover_transactions(const std::string& target);

}  // namespace jask
