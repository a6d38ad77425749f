#include "storage/file_table.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "base/errors.hpp"

namespace jask {

SharedFile::SharedFile(std::shared_ptr<File> file, bool scratch, OnClose on_close, FileTable* table)
    : path_(file->path()),
      scratch_(scratch),
      on_close_(std::move(on_close)),
      table_(table),
      file_(std::move(file)) {}

std::shared_ptr<SharedFile> SharedFile::unlisted(std::shared_ptr<File> file, bool scratch,
                                                 OnClose on_close) {
  return std::shared_ptr<SharedFile>(
      new SharedFile(std::move(file), scratch, std::move(on_close), nullptr));
}

// The table's expired entry goes at its next open (erasing it here would
// take the table's lock, which may be held by whoever dropped the last ref).
SharedFile::~SharedFile() {
  if (on_close_) on_close_(*file_);
}

std::shared_ptr<const File> SharedFile::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return file_;
}

void SharedFile::install(std::shared_ptr<File> file) {
  std::shared_ptr<File> old;  // closed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  old = std::exchange(file_, std::move(file));
}

void SharedFile::with_readers_held(const std::function<void()>& write) {
  {
    std::unique_lock<std::mutex> gate(gate_mu_);
    installing_ = true;
    gate_cv_.wait(gate, [&] { return readers_ == 0; });
  }
  struct Reopen {
    SharedFile& shared;
    ~Reopen() {
      std::lock_guard<std::mutex> gate(shared.gate_mu_);
      shared.installing_ = false;
      shared.gate_cv_.notify_all();
    }
  } reopen{*this};
  write();
}

void SharedFile::commit_replacement(ReplacementFile& next) {
  with_readers_held([&] {
    if (table_ == nullptr)
      install(next.commit());
    else
      table_->commit(*this, next);
  });
}

void SharedFile::begin_read() {
  std::unique_lock<std::mutex> gate(gate_mu_);
  gate_cv_.wait(gate, [&] { return !installing_; });
  ++readers_;
}

void SharedFile::end_read() {
  std::lock_guard<std::mutex> gate(gate_mu_);
  if (--readers_ == 0) gate_cv_.notify_all();
}

namespace {
thread_local std::vector<const SharedFile*> pinned_here;
}  // namespace

ReadPins::ReadPins(std::vector<std::shared_ptr<SharedFile>> files) {
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  for (std::shared_ptr<SharedFile>& f : files) {
    if (!f || std::find(pinned_here.begin(), pinned_here.end(), f.get()) != pinned_here.end())
      continue;
    f->begin_read();
    pinned_here.push_back(f.get());
    held_.push_back(std::move(f));
  }
}

ReadPins::~ReadPins() {
  for (const std::shared_ptr<SharedFile>& f : held_) {
    pinned_here.erase(std::find(pinned_here.begin(), pinned_here.end(), f.get()));
    f->end_read();
  }
}

FileTable& FileTable::instance() {
  static FileTable table;
  return table;
}

namespace {

// Takes the write lock of a writable open of `path` (one process writes a
// file at a time, so no update is lost). False if the file was replaced at
// the path between the open and the lock (an update_ elsewhere renamed a new
// file over it): the caller opens the path again.
bool lock_for_writing(const File& file, const std::string& path) {
  const FileIdentity id = file.identity();
  if (!file.try_lock_exclusive()) {
    throw LockedError("cannot open " + path +
                      " for writing: another process has it open for writing" + lock_holder(id) +
                      ". One process writes a file at a time (so no update is lost): open it "
                      "with mode=\"r\" to read it, or once that process has freed its arrays of "
                      "the file or exited");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  return FileIdentity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)} == id;
}

}  // namespace

std::shared_ptr<SharedFile> FileTable::open(const std::string& path, OpenMode mode) {
  // The file is opened under the table's lock: opened before it, a commit() of the same path in
  // between would leave this open on the replaced inode, and it would become a second entry.
  std::lock_guard<std::mutex> lock(mu_);
  if (mode == OpenMode::kCreateTruncate) refuse_truncating_an_open_file(path);
  for (int attempt = 0;; ++attempt) {
    auto file =
        std::make_shared<File>(path, mode == OpenMode::kCreateTruncate ? OpenMode::kCreate : mode);
    const FileIdentity id = file->identity();
    for (auto it = entries_.begin(); it != entries_.end();)
      it = it->second.expired() ? entries_.erase(it) : std::next(it);
    auto it = entries_.find(id);
    // lock() is null when the last array went since the sweep.
    std::shared_ptr<SharedFile> shared = it == entries_.end() ? nullptr : it->second.lock();
    // This process's own open of the file holds the lock already.
    const bool needs_lock = file->writable() && !(shared && shared->current()->writable());
    if (needs_lock && !lock_for_writing(*file, path)) {
      if (attempt < 100) continue;
      throw IoError("cannot open " + path + " for writing: it is being replaced continually");
    }
    if (shared) {
      if (needs_lock) shared->install(std::move(file));
      return shared;
    }
    if (mode == OpenMode::kCreateTruncate) file->resize(0);
    shared.reset(new SharedFile(std::move(file), false, nullptr, this));
    shared->identity_ = id;
    entries_[id] = shared;
    return shared;
  }
}

// Under the table's lock, so an open of the path after the rename finds
// the entry under the new identity, never a second entry of its own. (The
// fdatasync before it is the caller's, outside the lock.)
void FileTable::commit(SharedFile& shared, ReplacementFile& next) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<File> file = next.commit();
  const FileIdentity id = file->identity();
  shared.install(std::move(file));
  auto it = entries_.find(shared.identity_);
  if (it != entries_.end()) {
    std::weak_ptr<SharedFile> entry = std::move(it->second);
    entries_.erase(it);
    entries_[id] = std::move(entry);
  }
  shared.identity_ = id;
}

// Truncating a file that arrays are reading would destroy their data (and a
// save of x to x's own path would stream from the file it is truncating).
void FileTable::refuse_truncating_an_open_file(const std::string& path) const {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // a new file
  const FileIdentity id{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  auto it = entries_.find(id);
  if (it != entries_.end() && !it->second.expired()) {
    throw ValueError("cannot write a new file at " + path +
                     ": it is the file of an open DiskArray, whose data writing it would "
                     "destroy; save to another path, or use update_ to replace its values");
  }
}

size_t FileTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t live = 0;
  for (const auto& [id, entry] : entries_) live += entry.expired() ? 0 : 1;
  return live;
}

}  // namespace jask
