#include "storage/file_table.hpp"

#include <sys/stat.h>

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

void SharedFile::commit_replacement(ReplacementFile& next) {
  if (table_ == nullptr) return install(next.commit());
  table_->commit(*this, next);
}

FileTable& FileTable::instance() {
  static FileTable table;
  return table;
}

std::shared_ptr<SharedFile> FileTable::open(const std::string& path, OpenMode mode) {
  // The file is opened under the table's lock: opened before it, a commit() of the same path in
  // between would leave this open on the replaced inode, and it would become a second entry.
  std::lock_guard<std::mutex> lock(mu_);
  if (mode == OpenMode::kCreateTruncate) refuse_truncating_an_open_file(path);
  auto file = std::make_shared<File>(path, mode);
  const FileIdentity id = file->identity();
  for (auto it = entries_.begin(); it != entries_.end();)
    it = it->second.expired() ? entries_.erase(it) : std::next(it);
  auto it = entries_.find(id);
  // lock() is null when the last array went since the sweep.
  if (std::shared_ptr<SharedFile> shared = it == entries_.end() ? nullptr : it->second.lock()) {
    if (file->writable() && !shared->current()->writable()) shared->install(std::move(file));
    return shared;
  }
  std::shared_ptr<SharedFile> shared(new SharedFile(std::move(file), false, nullptr, this));
  shared->identity_ = id;
  entries_[id] = shared;
  return shared;
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
