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
// Recovery (recover_transactions, at writable opens and updates) starts from
// the target's own pointer files and acts only in the target's folder: a
// pointer no live writer holds whose record exists is rolled forward (the
// renames of step 3 redone for the files in that folder; the record goes
// once no file of it is left); one without a record is undone (its new file
// and, beside it, the record's .part removed). Pointer and record are
// checksummed (CRC32C) and name the writer's host (the record its pid too);
// every path they name must be Jask's own: the record
// <first target>.jask-txn-<id>.journal of the pointer's <id>, each new file
// <target>.jask-txn-<id> beside its target, all regular files (opened
// O_NOFOLLOW | O_NONBLOCK, checked with fstat). Anything else, a writer on
// another host, or a record of version 1 (an older Jask, no checksum) is left
// alone and reported (note_recovery, storage/journal.hpp). A read-only open
// acts on nothing: committed_replacement says which file holds the committed
// values. Cost over update_ of each array: one small pointer file per file,
// one commit record and its fsync, and one fsync per folder.
#pragma once
#include <optional>
#include <string>
#include <utility>
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
// at `target` (above), in its folder. Rolling forward renames files there:
// where that is refused, an IoError says how to finish it. Called at every
// writable open and update of a file.
void recover_transactions(const std::string& target);

// The new file of a committed transaction of `target` that is not yet
// renamed over it (<target>.jask-txn-<id>): what a read-only open reads in
// its place, so that it sees the committed values without renaming
// anything. Nothing when no such transaction is found (the target holds the
// latest committed values). Reports a dead writer's transaction (a writable
// open finishes it) and files it ignored; writes, renames and removes nothing.
std::optional<std::string> committed_replacement(const std::string& target);

// The contents of a pointer file and of a commit record as replace_all
// writes them (for tests that plant them). `id` is "<pid>-<16 hex digits>".
struct TransactionRecord {
  std::string id, host;
  int pid = 0;
  std::vector<std::pair<std::string, std::string>> pairs;  // (new file, target)
};
std::string encode_transaction_pointer(const std::string& host, const std::string& record);
std::string encode_transaction_record(const TransactionRecord& record);
// This machine's name as records give it.
const std::string& transaction_host();

}  // namespace jask
