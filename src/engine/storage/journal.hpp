// update_ of one array in place, through a redo journal beside its file
// (<file>.jask-journal), for files that hold much besides the array (a
// safetensors shard, a raw container): the cost is the array's bytes written
// twice and two flushes, whatever the file's size, where the rename of
// StoredArray::replace_data copies the whole file. A crash at any moment
// leaves the array all old or all new and every other byte of the file as it
// was.
//
// Protocol, one update at a time per file (SharedFile::replacing in the
// process, the file's write lock across processes):
//  1. <file>.jask-journal.part is created and flock()ed; the new bytes of the
//     array's extent are streamed into its payload area, checksummed
//     (CRC32C) as they stream; the header (the file's device, inode and
//     size, the extent, the payload's and its own checksum) is written and
//     the journal fdatasync'ed, renamed to <file>.jask-journal and the folder
//     fsync'ed: the commit point. The lock moves with the inode, so a journal
//     at its final name is locked for as long as its writer lives.
//  2. The payload is written over the extent, the file fdatasync'ed.
//  3. The journal is unlinked, the folder fsync'ed.
// Recovery (recover_journal) runs at every open and update of the file. A
// .part no live writer holds is removed: the file was never touched. A
// journal no live writer holds is replayed (steps 2 and 3 again: writing the
// same bytes twice is harmless) when its checksums hold and it names the
// file; otherwise it is removed, for the file was never touched. A live
// writer's journal is waited for (flock), then looked at again.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/file.hpp"

namespace jask {

// update_ writes in place (through a journal) when the bytes of the file
// outside the array exceed this, and renames a new copy of the file over it
// otherwise (a .npy, a raw file of one array). Default 1 MiB.
uint64_t in_place_update_threshold();
void set_in_place_update_threshold(uint64_t bytes);

// CRC32C (Castagnoli), continued from `crc` (0 to start): crc32c(crc32c(0,
// a), b) is the checksum of a followed by b. Hardware instructions where the
// CPU has them.
uint32_t crc32c(uint32_t crc, const void* data, size_t n);
// The checksum of a followed by b, from a's, b's and b's length.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);

// A run of bytes of a file: what a journal replaces.
struct ByteRun {
  uint64_t offset = 0, length = 0;
};

// The journal's header. One run (update_ of a whole array) takes
// kHeaderBytes bytes and its payload starts at payload_offset, congruent to
// the run's offset mod 4096 (so both of its copies go direct). Several runs
// (rows written in place, kernels/write_rows.hpp) take as many 4096-byte
// blocks as their run table needs, and their payload follows, packed: run k's
// bytes after those of runs 0..k-1.
struct JournalHeader {
  static constexpr size_t kHeaderBytes = kIoAlignment;
  FileIdentity file;
  uint64_t file_size = 0;
  std::vector<ByteRun> runs;  // ascending, disjoint, none empty
  uint64_t payload_offset = 0;
  uint32_t payload_crc = 0;

  // The payload's bytes: the runs' lengths summed.
  uint64_t length() const;
  // The header's bytes (a multiple of kHeaderBytes), ending the fields with
  // their own checksum.
  std::string encode() const;
  // The header in `bytes`, or nothing if they are not a whole, intact one.
  static std::optional<JournalHeader> decode(std::string_view bytes);
  // How many bytes the header that starts with `first` (its first
  // kHeaderBytes) takes, or 0 if they start no header.
  static uint64_t size_from(std::string_view first);
  static uint64_t payload_offset_for(uint64_t offset) {
    return kHeaderBytes + offset % kIoAlignment;
  }
  static uint64_t payload_offset_for(const std::vector<ByteRun>& runs);
};

// Writes the runs' bytes, packed in `data` in run order, to their offsets of
// `file`: one request per run. The one place rows are written in place, so
// that parallel I/O of many runs can replace it.
void write_runs(const File& file, const std::byte* data, const std::vector<ByteRun>& runs,
                const IoPolicy& io);

// <target, symlinks followed>.jask-journal.
std::string journal_path(const std::string& target);

// The writer's side of one update (the protocol above). Destroyed before
// commit() has returned, it removes its journal (the file is untouched);
// after, and before finish(), it leaves the journal for recovery to replay
// (an error while writing in place).
class JournalWriter {
 public:
  // For the bytes [offset, offset + length) of `target`, whose open is `file`.
  JournalWriter(const std::string& target, const File& file, uint64_t offset, uint64_t length);
  // For several runs of it (ascending, disjoint, none empty).
  JournalWriter(const std::string& target, const File& file, std::vector<ByteRun> runs);
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  // The journal, to stream the payload into at payload_offset() on.
  const std::shared_ptr<File>& file() const { return journal_; }
  uint64_t payload_offset() const { return header_.payload_offset; }
  // `n` bytes at `data` were written at journal offset `at` (thread-safe):
  // their checksum is taken now, while they are in memory.
  void wrote(const void* data, size_t n, uint64_t at);
  // Step 1's end: header, flush, rename, folder flush.
  void commit();
  // Step 2: the payload over the extent of `target` (the update's open of
  // the file, writable).
  void write_in_place(const File& target) const;
  // Step 2 from the payload as it is in memory (`payload`: length() bytes),
  // not read back from the journal.
  void write_in_place(const File& target, const std::byte* payload) const;
  // Step 2's fdatasync of `target` (readers need not wait for it), then step 3.
  void finish(const File& target);
  const std::string& path() const { return path_; }

 private:
  uint32_t payload_crc() const;

  std::string path_;  // the journal's final name
  std::string part_;
  std::string folder_;
  JournalHeader header_;
  std::shared_ptr<File> journal_;
  bool renamed_ = false, committed_ = false;
  struct Piece {
    uint64_t at, n;
    uint32_t crc;
  };
  mutable std::mutex mu_;
  std::vector<Piece> pieces_;
};

// Finishes a journal a dead process left beside `target` (see above); a
// .part no live writer holds is removed. A replay writes the file: where this
// process may not, a ReadOnlyError names the journal and says that a writable
// open must replay it. A journal that is not a regular file, or whose
// checksums fail or that names another file, is left alone and reported
// (note_recovery): it may be a stranger's file, and the file was never
// touched by it. Only for writable opens and updates.
void recover_journal(const std::string& target);

// What a read-only open of `target`, opened as `file`, reads instead of
// replaying a journal it may not write: the payload of the intact journal
// naming `file` over its runs, or null when there is none. Writes, renames and
// removes nothing; a journal whose writer is dead is reported (a writable open
// finishes it), one it ignores too.
std::shared_ptr<const ReadOverlay> committed_overlay(const std::string& target, const File& file);

// Whether anything (of any kind) is at `target`'s journal's name.
bool journal_present(const std::string& target);

// --- Shared by journal and transaction recovery ---------------------------

// Files recovery left alone, and committed states a read-only open read
// without finishing them: each message once per process. The innermost
// RecoveryNotes of the thread collects them (the binding layer makes them
// Python warnings); without one they go to stderr.
void note_recovery(const std::string& message);
class RecoveryNotes {
 public:
  RecoveryNotes();
  ~RecoveryNotes();
  RecoveryNotes(const RecoveryNotes&) = delete;
  RecoveryNotes& operator=(const RecoveryNotes&) = delete;
  std::vector<std::string> take() { return std::move(notes_); }

 private:
  friend void note_recovery(const std::string& message);
  std::vector<std::string> notes_;
  RecoveryNotes* outer_;
};

// A file recovery reads (a journal, a pointer, a commit record), opened
// read-only with O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC and kept only if fstat
// says it is a regular file: a FIFO or a link under a recovery file's name
// neither blocks nor is followed. Closed on destruction.
// Who may have written a recovery file that Jask acts on or reads values from,
// for the file `target` (a journal, pointer, record or staged new file beside
// it): the target's owner, root, or this process's user. In a folder shared
// with other users (a sticky /tmp), anyone can plant files of Jask's names;
// none of theirs is trusted. An empty string if `uid` may; else why not.
std::string untrusted_owner(unsigned uid, const std::string& target);

class RecoveryFile {
 public:
  enum class State { kAbsent, kOpen, kRefused };
  // Refused too (State::kRefused) when `target` is given and the file's owner
  // may not have written a recovery file for it (untrusted_owner).
  explicit RecoveryFile(std::string path, const std::string& target = "");
  ~RecoveryFile();
  RecoveryFile(const RecoveryFile&) = delete;
  RecoveryFile& operator=(const RecoveryFile&) = delete;

  State state() const { return state_; }
  // Why it was refused ("a FIFO, not a regular file").
  const std::string& refusal() const { return refusal_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  // Its first `limit` bytes at most.
  std::string read(size_t limit) const;
  // flock(LOCK_EX) taken (waiting for the holder when `wait`); false if
  // another open holds it. File systems without flock() report true.
  bool lock(bool wait) const;
  // Another open holds a flock() on it: its writer lives. Takes no lock
  // that outlasts the call.
  bool held_by_writer() const;
  // The path still names the file opened (neither removed nor replaced).
  bool still_at() const;

 private:
  std::string path_;
  State state_ = State::kAbsent;
  std::string refusal_;
  int fd_ = -1;
};

// What a non-regular file is, for messages ("a FIFO", "a symbolic link").
std::string file_kind(unsigned mode);

}  // namespace jask
