// One open per file. Every array of a file (the arrays of a container file,
// a file opened twice, through a symlink or at several offsets, and every
// view of them) shares one SharedFile: one open File, one replacement lock.
// update_ of one array replaces the file for all of them, so it keeps the
// others' current bytes and re-points every one of them at the new file.
#pragma once
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/file.hpp"

namespace jask {

class FileTable;

class SharedFile {
 public:
  using OnClose = std::function<void(const File& last)>;
  // A file no other open will find (scratch files, a replacement being
  // written); `on_close` runs with the last File when the last array goes.
  static std::shared_ptr<SharedFile> unlisted(std::shared_ptr<File> file, bool scratch,
                                              OnClose on_close = nullptr);
  ~SharedFile();
  SharedFile(const SharedFile&) = delete;
  SharedFile& operator=(const SharedFile&) = delete;

  // The file now behind every array of this entry, copied under a lock per
  // read or write: a replacement may be installed from another thread at
  // any time; a File held stays readable (its inode alive).
  std::shared_ptr<const File> current() const;
  // The path update_ replaces: the one this entry was first opened by.
  const std::string& path() const { return path_; }
  bool scratch() const { return scratch_; }

  // Renames `next` over path() and installs it for every array of the file;
  // the table then finds the file under its new identity. Only while
  // holding `replacing`, and no ReadPins of this file on this thread: it
  // waits for the calls that pinned the file to end, and holds back new ones
  // until the new file is in.
  void commit_replacement(ReplacementFile& next);
  // Runs `write` while no engine call of this process reads the file (an
  // in-place update's write over an array's bytes, storage/journal.hpp): it
  // waits for the calls that pinned the file to end, and holds back new ones
  // until `write` returns. Only while holding `replacing`, and no ReadPins of
  // this file on this thread.
  void with_readers_held(const std::function<void()>& write);

  // Held for a whole update_ of any array of the file: renames and installs
  // happen one at a time, each building on the last one's bytes.
  std::mutex replacing;

 private:
  friend class FileTable;
  SharedFile(std::shared_ptr<File> file, bool scratch, OnClose on_close, FileTable* table);
  friend class ReadPins;
  void install(std::shared_ptr<File> file);
  void begin_read();
  void end_read();

  const std::string path_;
  const bool scratch_;
  const OnClose on_close_;
  FileTable* const table_;  // null: unlisted
  FileIdentity identity_;   // guarded by the table's lock
  mutable std::mutex mu_;
  std::shared_ptr<File> file_;
  // Calls that pinned the file, and whether an install (or an in-place
  // write) waits for them to end.
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  int readers_ = 0;
  bool installing_ = false;
};

// The files an engine call reads, held at one version for the whole call:
// an update_ of one of them renames its new file in only after the call
// ends, and calls starting meanwhile wait for the (brief) install. So every
// block a call reads of an array comes from one version of it, whichever
// thread reads it. Files are pinned in address order (no two calls wait on
// each other); a file this thread has pinned already (a call inside a call)
// is not pinned twice.
class ReadPins {
 public:
  explicit ReadPins(std::vector<std::shared_ptr<SharedFile>> files);
  ~ReadPins();
  ReadPins(const ReadPins&) = delete;
  ReadPins& operator=(const ReadPins&) = delete;

 private:
  std::vector<std::shared_ptr<SharedFile>> held_;
};

// The process's open files, keyed by FileIdentity (device + inode), so two
// spellings of one path are one entry. Holds entries weakly: a file closes
// with its last array.
class FileTable {
 public:
  static FileTable& instance();
  // The entry of the file at `path`, opening it with `mode` when no array
  // has it open. A writable open of a file open read-only reopens it
  // writable for the entry (each array still says whether it may write).
  // kCreateTruncate of a file an array has open is a ValueError; of a file
  // another process writes, a LockedError (before anything is truncated).
  std::shared_ptr<SharedFile> open(const std::string& path, OpenMode mode);
  // Entries with a live array (for tests).
  size_t size() const;

 private:
  friend class SharedFile;
  void commit(SharedFile& shared, ReplacementFile& next);
  void refuse_truncating_an_open_file(const std::string& path) const;  // under mu_

  mutable std::mutex mu_;
  std::map<FileIdentity, std::weak_ptr<SharedFile>> entries_;
};

}  // namespace jask
