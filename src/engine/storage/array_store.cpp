#include "storage/array_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "base/errors.hpp"
#include "base/memory_budget.hpp"
#include "formats/npy_format.hpp"
#include "storage/scratch.hpp"
#include "storage/scratch_pool.hpp"

namespace jask {

int64_t ArrayInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ArrayInfo::describe() const {
  std::string s = std::string(dtype_name(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

void check_shape(const std::vector<int64_t>& shape, const std::string& what) {
  for (int64_t d : shape) {
    if (d < 0) throw ValueError(what + ": negative dimension in shape");
  }
}

// Copies bytes [begin, end) from one file to the same offsets in another, in
// chunks within the memory budget (a raw file's prefix may be large).
void copy_range(const File& from, const File& to, uint64_t begin, uint64_t end) {
  if (end <= begin) return;
  const uint64_t budget = static_cast<uint64_t>(std::max<int64_t>(memory_budget(), 1));
  const uint64_t chunk = std::min<uint64_t>({end - begin, budget, uint64_t{1} << 20});
  AlignedBuffer buf(chunk);
  for (uint64_t at = begin; at < end; at += chunk) {
    const size_t n = std::min(chunk, end - at);
    from.read_at(buf.data(), n, at);
    to.write_at(buf.data(), n, at);
  }
}

}  // namespace

ArrayRef StoredArray::create_npy(const std::string& path, const ArrayInfo& info, bool scratch,
                                 ScratchContents contents) {
  check_shape(info.shape, path);
  std::string header = make_npy_header(info.dtype, info.shape);
  const uint64_t bytes = header.size() + info.nbytes();
  const bool recycled = scratch && contents == ScratchContents::kOverwritten &&
                        ScratchPool::instance().take(bytes, path);
  const OpenMode mode = recycled  ? OpenMode::kReadWrite
                        : scratch ? OpenMode::kCreateExclusive
                                  : OpenMode::kCreateTruncate;
  auto file = std::make_unique<File>(path, mode);
  file->write_at(header.data(), header.size(), 0);
  file->resize(bytes);
  if (scratch) ScratchPool::instance().created(bytes);
  return ArrayRef(new StoredArray(std::move(file), info, header.size(), scratch));
}

ArrayRef StoredArray::create_file(const std::string& path, const ArrayInfo& info) {
  return create_npy(path, info, false);
}

ArrayRef StoredArray::create_scratch(const ArrayInfo& info, const std::string& tag,
                                     ScratchContents contents) {
  return create_npy(Scratch::instance().new_file_path(tag), info, true, contents);
}

ArrayRef StoredArray::open_npy(const std::string& path, bool writable) {
  if (writable) remove_stale_replacements(path);
  auto file = std::make_unique<File>(path, writable ? OpenMode::kReadWrite : OpenMode::kReadOnly);
  uint64_t size = file->size();
  std::string prefix(std::min<uint64_t>(size, 12), '\0');
  file->read_at(prefix.data(), prefix.size(), 0);
  uint64_t header_len = npy_header_length(prefix, path);
  if (header_len > size) throw ValueError(path + ": truncated .npy header");
  std::string header(header_len, '\0');
  file->read_at(header.data(), header.size(), 0);
  NpyHeader h = parse_npy_header(header, path);
  ArrayInfo info{h.dtype, h.shape};
  if (size < h.data_offset + info.nbytes()) {
    throw ValueError(path + " is too short: " + info.describe() + " needs " +
                     std::to_string(info.nbytes()) + " data bytes after the " +
                     std::to_string(h.data_offset) + "-byte header, but the file has only " +
                     std::to_string(size - h.data_offset));
  }
  return ArrayRef(new StoredArray(std::move(file), info, h.data_offset, false));
}

ArrayRef StoredArray::open_raw(const std::string& path, const ArrayInfo& info, uint64_t offset,
                               bool writable) {
  check_shape(info.shape, path);
  if (writable) remove_stale_replacements(path);
  auto file = std::make_unique<File>(path, writable ? OpenMode::kReadWrite : OpenMode::kReadOnly);
  uint64_t size = file->size();
  if (size < offset + info.nbytes()) {
    throw ValueError(path + " is too short: " + info.describe() + " at offset " +
                     std::to_string(offset) + " needs " + std::to_string(offset + info.nbytes()) +
                     " bytes, but the file has " + std::to_string(size));
  }
  return ArrayRef(new StoredArray(std::move(file), info, offset, false));
}

StoredArray::OwnedFile::OwnedFile(std::shared_ptr<File> f, bool s)
    : path(f->path()), scratch(s), file_(std::move(f)) {}

StoredArray::OwnedFile::~OwnedFile() {
  if (!scratch) return;
  uint64_t bytes = 0, allocated = 0;
  try {
    bytes = file_->size();
    allocated = file_->allocated_bytes();
  } catch (const std::exception&) {
    bytes = 0;  // unknown size: release() unlinks it
  }
  ScratchPool::instance().release(path, bytes, allocated);
}

std::shared_ptr<const File> StoredArray::OwnedFile::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return file_;
}

void StoredArray::OwnedFile::install(std::shared_ptr<File> f) {
  std::shared_ptr<File> old;  // closed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  old = std::exchange(file_, std::move(f));
}

ArrayRef StoredArray::reshaped(const ArrayRef& base, const std::vector<int64_t>& shape) {
  check_shape(shape, base->path());
  ArrayInfo info{base->info().dtype, shape};
  if (info.numel() != base->info().numel()) {
    throw ValueError("cannot reshape " + base->info().describe() + " to " + info.describe() +
                     ": the sizes differ");
  }
  return ArrayRef(new StoredArray(base->file_, info, base->data_offset_));
}

ArrayRef StoredArray::viewed(const ArrayRef& base, int64_t first,
                             const std::vector<int64_t>& shape) {
  check_shape(shape, base->path());
  ArrayInfo info{base->info().dtype, shape};
  if (first < 0 || first + info.numel() > base->info().numel()) {
    throw ValueError("cannot view elements [" + std::to_string(first) + ", " +
                     std::to_string(first + info.numel()) + ") of " + base->info().describe() +
                     " as " + info.describe());
  }
  const uint64_t offset = base->data_offset_ + static_cast<uint64_t>(first) * itemsize(info.dtype);
  return ArrayRef(new StoredArray(base->file_, info, offset));
}

void StoredArray::read_elems(void* dst, int64_t first, int64_t count) const {
  size_t isz = itemsize(info_.dtype);
  file_->current()->read_at(dst, static_cast<size_t>(count) * isz,
                            data_offset_ + static_cast<uint64_t>(first) * isz);
}

void StoredArray::write_elems(const void* src, int64_t first, int64_t count) const {
  size_t isz = itemsize(info_.dtype);
  file_->current()->write_at(src, static_cast<size_t>(count) * isz,
                             data_offset_ + static_cast<uint64_t>(first) * isz);
}

void StoredArray::replace_data(const DataWriter& write_data) {
  std::lock_guard<std::mutex> one_at_a_time(file_->replacing);
  std::shared_ptr<const File> old = file_->current();
  if (!old->writable()) {
    throw ReadOnlyError("cannot replace the contents of " + path() + ": it was opened read-only");
  }
  // A scratch folder belongs to this process: no dead process left files there.
  if (!file_->scratch) remove_stale_replacements(path());
  const uint64_t size = old->size();
  ReplacementFile next(path(), size);
  copy_range(*old, *next.file(), 0, data_offset_);
  copy_range(*old, *next.file(), data_offset_ + info_.nbytes(), size);
  StoredArray staged(std::make_shared<OwnedFile>(next.file(), /*scratch=*/false), info_,
                     data_offset_);
  write_data(staged);
  // A scratch file never outlives its process (its folder is reclaimed after
  // a crash), so flushing it to disk would buy nothing.
  const bool durable = !file_->scratch;
  file_->install(next.commit(durable));
  if (durable) next.sync_directory();
}

Registry& Registry::instance() {
  static Registry registry;
  return registry;
}

int32_t Registry::add(ArrayRef array) {
  std::lock_guard<std::mutex> lock(mu_);
  int32_t h = next_++;
  entries_.emplace(h, Entry{std::move(array), 0});
  return h;
}

ArrayRef Registry::get(int32_t handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(handle);
  if (it == entries_.end()) {
    throw ValueError("unknown array handle " + std::to_string(handle) +
                     " (the array was freed, or the handle came from another process)");
  }
  return it->second.array;
}

void Registry::acquire(int32_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(handle);
  if (it == entries_.end()) throw ValueError("unknown array handle " + std::to_string(handle));
  ++it->second.owners;
}

void Registry::release(int32_t handle) {
  ArrayRef doomed;  // destroyed outside the lock: unlinking a file takes time
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(handle);
    if (it == entries_.end()) return;
    if (--it->second.owners > 0) return;
    doomed = std::move(it->second.array);
    entries_.erase(it);
  }
}

void Registry::release_floating(int32_t handle) {
  ArrayRef doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(handle);
    if (it == entries_.end() || it->second.owners > 0) return;
    doomed = std::move(it->second.array);
    entries_.erase(it);
  }
}

size_t Registry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void Registry::clear() {
  std::unordered_map<int32_t, Entry> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    doomed.swap(entries_);
  }
}

}  // namespace jask
