#include "storage/array_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <utility>

#include "base/errors.hpp"
#include "base/memory_budget.hpp"
#include "formats/npy.hpp"
#include "formats/registry.hpp"
#include "storage/chunked.hpp"
#include "storage/io_config.hpp"
#include "storage/journal.hpp"
#include "storage/scratch.hpp"
#include "storage/scratch_pool.hpp"
#include "storage/transaction.hpp"

namespace jask {
namespace {

// Copies bytes [begin, end) from one file to the same offsets in another, in
// chunks within the memory budget (a raw file's prefix may be large).
void copy_range(const File& from, const File& to, uint64_t begin, uint64_t end,
                const IoPolicy& io) {
  if (end <= begin) return;
  const uint64_t budget = static_cast<uint64_t>(std::max<int64_t>(memory_budget(), 1));
  const uint64_t chunk = std::min<uint64_t>({end - begin, budget, uint64_t{1} << 20});
  AlignedBuffer buf(chunk);
  for (uint64_t at = begin; at < end; at += chunk) {
    const size_t n = std::min(chunk, end - at);
    from.read_at(buf.data(), n, at, io);
    to.write_at(buf.data(), n, at, io);
  }
}

// Writes the header of a new file (Jask creates .npy files) and sizes it.
void write_new_file(const File& file, const ArrayInfo& info, const Layout& layout) {
  npy_format().write_header(file, header_io_policy(), info);
  file.resize(layout.data_bytes(info).second);
}

// The scratch pool hears of a scratch file's end, to recycle it.
void release_to_pool(const File& last) {
  uint64_t bytes = 0, allocated = 0;
  try {
    bytes = last.size();
    allocated = last.allocated_bytes();
  } catch (const std::exception&) {
    bytes = 0;  // unknown size: release() unlinks it
  }
  ScratchPool::instance().release(last.path(), bytes, allocated);
}

// A read-only open of the file at `path` as its writers last committed it,
// touching nothing: where a dead writer's update_tree_ committed a new file
// not yet renamed over it, that file; where an update_ in place committed its
// journal, the file with the journal's payload over its runs. Either is a
// private open (no other array shares it, and updates through the table do
// not reach it); otherwise the table's shared one.
std::shared_ptr<SharedFile> open_committed(const std::string& path) {
  std::shared_ptr<File> file;
  if (std::optional<std::string> replacement = committed_replacement(path)) {
    try {
      file = std::make_shared<File>(*replacement, OpenMode::kReadOnly, Links::kRefuse);
    } catch (const NotFoundError&) {
      // Renamed over the path meanwhile: the path holds the new values.
    }
  }
  const bool replaced = file != nullptr;
  if (!replaced) {
    if (!journal_present(path)) return FileTable::instance().open(path, OpenMode::kReadOnly);
    file = std::make_shared<File>(path, OpenMode::kReadOnly);
  }
  std::shared_ptr<const ReadOverlay> overlay = committed_overlay(path, *file);
  if (overlay == nullptr && !replaced) return FileTable::instance().open(path, OpenMode::kReadOnly);
  if (overlay != nullptr) file->set_overlay(std::move(overlay));
  return SharedFile::unlisted(std::move(file), /*scratch=*/false);
}

}  // namespace

ArrayRef StoredArray::create_file(const std::string& path, const ArrayInfo& info) {
  const Layout layout = npy_format().new_layout(info);
  check_sizes(info, path, layout.data_offset());
  std::shared_ptr<SharedFile> shared = FileTable::instance().open(path, OpenMode::kCreateTruncate);
  write_new_file(*shared->current(), info, layout);
  return ArrayRef(new StoredArray(std::move(shared), path, info, layout, true));
}

// The scratch pool is policy over this: an op that overwrites every byte of
// its output may get the file of a freed scratch array, renamed to `path`.
ArrayRef StoredArray::create_scratch(const ArrayInfo& info, const std::string& tag,
                                     ScratchContents contents) {
  const std::string path = Scratch::instance().new_file_path(tag);
  const Layout layout = npy_format().new_layout(info);
  check_sizes(info, path, layout.data_offset());
  const uint64_t bytes = layout.data_bytes(info).second;
  const bool recycled =
      contents == ScratchContents::kOverwritten && ScratchPool::instance().take(bytes, path);
  std::shared_ptr<File> file;
  try {
    file =
        std::make_shared<File>(path, recycled ? OpenMode::kReadWrite : OpenMode::kCreateExclusive);
    write_new_file(*file, info, layout);
  } catch (...) {
    // A full disk fails the header's write: the file goes with the error. The
    // path is this process's own (a fresh name, or a pooled file renamed to it).
    if (file != nullptr || recycled) ::unlink(path.c_str());
    throw;
  }
  ScratchPool::instance().created(bytes);
  auto shared = SharedFile::unlisted(std::move(file), /*scratch=*/true, release_to_pool);
  return ArrayRef(new StoredArray(std::move(shared), path, info, layout, true));
}

ArrayRef StoredArray::open(const std::string& path, std::string_view format_name,
                           const OpenOptions& options) {
  std::shared_ptr<SharedFile> shared;
  if (options.writable) {
    // A dead process's update_tree_ is finished (or undone) before any read,
    // and a dead process's update_ in place replayed.
    recover_transactions(path);
    recover_journal(path);
    remove_stale_replacements(path);
    shared = FileTable::instance().open(path, OpenMode::kReadWrite);
  } else {
    shared = open_committed(path);
  }
  std::shared_ptr<const File> file = shared->current();
  const IoPolicy io = header_io_policy();
  const Format* format = nullptr;
  if (format_name.empty()) {
    std::string leading(std::min<uint64_t>(file->size(), kDetectBytes), '\0');
    file->read_at(leading.data(), leading.size(), 0, io);
    format = detect_format(leading, path);
    if (format == nullptr) {
      throw ValueError(path +
                       ": not a file of a known format (a .npy file starts with \\x93NUMPY); to "
                       "open a raw binary file pass shape= and dtype=");
    }
  } else {
    format = &format_named(format_name);
  }
  ArrayHeader header = format->read_header(*file, io, path, options);
  return ArrayRef(new StoredArray(std::move(shared), path, std::move(header.info), header.layout,
                                  options.writable));
}

ArrayRef StoredArray::open_chunked(ChunkTable table) {
  auto source = std::make_shared<const ChunkedSource>(std::move(table));
  const ChunkTable& t = source->table();
  check_sizes(t.info, t.path);
  std::shared_ptr<SharedFile> shared = FileTable::instance().open(t.path, OpenMode::kReadOnly);
  ArrayRef a(new StoredArray(std::move(shared), t.path, t.info, Layout::contiguous(0), false));
  a->chunked_ = std::move(source);
  return a;
}

ArrayRef StoredArray::reshaped(const ArrayRef& base, const std::vector<int64_t>& shape) {
  ArrayInfo info{base->info().dtype, shape};
  check_sizes(info, base->path());
  if (info.numel() != base->info().numel()) {
    throw ValueError("cannot reshape " + base->info().describe() + " to " + info.describe() +
                     ": the sizes differ");
  }
  ArrayRef a(new StoredArray(base->file_, base->path_, info, base->layout_, base->writable_));
  a->chunked_ = base->chunked_;
  a->chunk_base_ = base->chunk_base_;
  return a;
}

ArrayRef StoredArray::viewed(const ArrayRef& base, int64_t first,
                             const std::vector<int64_t>& shape) {
  ArrayInfo info{base->info().dtype, shape};
  check_sizes(info, base->path());
  if (first < 0 || first > base->info().numel() || info.numel() > base->info().numel() - first) {
    throw ValueError("cannot view " + std::to_string(info.numel()) + " elements from element " +
                     std::to_string(first) + " of " + base->info().describe() + " as " +
                     info.describe());
  }
  const Layout layout = base->layout_.from_element(first, itemsize(info.dtype));
  ArrayRef a(new StoredArray(base->file_, base->path_, info, layout, base->writable_));
  a->chunked_ = base->chunked_;
  a->chunk_base_ = base->chunk_base_ + first;
  return a;
}

template <class ReadExtent>
void StoredArray::read_extents(void* dst, int64_t first, int64_t count, ReadExtent read) const {
  if (chunked_ != nullptr) return chunked_->read(dst, chunk_base_ + first, count);
  std::shared_ptr<const File> file = file_->current();
  const IoPolicy io = io_policy();
  auto* out = static_cast<std::byte*>(dst);
  layout_.for_each_extent(
      first, count, itemsize(info_.dtype),
      [&](uint64_t offset, size_t bytes, size_t at) { read(*file, out + at, bytes, offset, io); });
}

void StoredArray::read_elems(void* dst, int64_t first, int64_t count, AlignedBuffer* bounce) const {
  read_extents(
      dst, first, count,
      [&](const File& file, std::byte* to, size_t bytes, uint64_t offset, const IoPolicy& io) {
        if (bounce != nullptr)
          file.read_at_through(to, bytes, offset, io, *bounce);
        else
          file.read_at(to, bytes, offset, io);
      });
}

void StoredArray::read_elems_in_place(void* dst, int64_t first, int64_t count) const {
  // Pieces after the first would overwrite the bytes before them, which are
  // the range's own: only a range that is one piece in the file reads in place.
  int pieces = 0;
  layout_.for_each_extent(first, count, itemsize(info_.dtype),
                          [&](uint64_t, size_t, size_t) { ++pieces; });
  read_extents(
      dst, first, count,
      [&](const File& file, std::byte* to, size_t bytes, uint64_t offset, const IoPolicy& io) {
        if (pieces == 1)
          file.read_in_place(to, bytes, offset, io);
        else
          file.read_at(to, bytes, offset, io);
      });
}

void StoredArray::write_elems(const void* src, int64_t first, int64_t count) const {
  if (!writable_) throw ReadOnlyError("cannot write to " + path_ + ": it was opened read-only");
  std::shared_ptr<const File> file = file_->current();
  const IoPolicy io = io_policy();
  const auto* in = static_cast<const std::byte*>(src);
  layout_.for_each_extent(first, count, itemsize(info_.dtype),
                          [&](uint64_t offset, size_t bytes, size_t at) {
                            file->write_at(in + at, bytes, offset, io);
                            if (on_write_) on_write_(in + at, bytes, offset);
                          });
}

void StoredArray::replace_data(const DataWriter& write_data) {
  if (!writable_) {
    throw ReadOnlyError("cannot replace the contents of " + path_ + ": it was opened read-only");
  }
  std::lock_guard<std::mutex> one_at_a_time(file_->replacing);
  // A scratch folder belongs to this process: no dead process left files there.
  if (!file_->scratch()) {
    remove_stale_replacements(file_->path());
    recover_transactions(file_->path());
    recover_journal(file_->path());
  }
  if (updates_in_place()) return update_in_place(write_data);
  std::unique_ptr<ReplacementFile> next = stage_data(write_data);
  // A scratch file never outlives its process (its folder is reclaimed after
  // a crash), so flushing it to disk would buy nothing.
  const bool durable = !file_->scratch();
  if (durable) next->sync();
  crash_if("replace_staged");
  file_->commit_replacement(*next);
  crash_if("replace_renamed");
  if (durable) next->sync_directory();
}

bool StoredArray::updates_in_place() const {
  if (file_->scratch()) return false;
  const auto [begin, end] = layout_.data_bytes(info_);
  if (end == begin) return false;
  // The journal holds one extent: the data must be one run of bytes.
  int runs = 0;
  bool whole = false;
  layout_.for_each_extent(0, info_.numel(), itemsize(info_.dtype),
                          [&](uint64_t offset, size_t bytes, size_t) {
                            ++runs;
                            whole = offset == begin && bytes == end - begin;
                          });
  if (runs != 1 || !whole) return false;
  return file_->current()->size() - (end - begin) > in_place_update_threshold();
}

void StoredArray::update_in_place(const DataWriter& write_data) {
  std::shared_ptr<const File> file = file_->current();
  if (!file->writable()) {
    throw ReadOnlyError("cannot replace the contents of " + path_ + ": it was opened read-only");
  }
  const auto [begin, end] = layout_.data_bytes(info_);
  JournalWriter journal(file_->path(), *file, begin, end - begin);
  StoredArray staged(SharedFile::unlisted(journal.file(), /*scratch=*/false), path_, info_,
                     Layout::contiguous(journal.payload_offset()), true);
  staged.on_write_ = [&journal](const void* data, size_t n, uint64_t at) {
    journal.wrote(data, n, at);
  };
  write_data(staged);
  journal.commit();
  try {
    file_->with_readers_held([&] { journal.write_in_place(*file); });
    journal.finish(*file);
  } catch (const IoError& e) {
    throw IoError("update_ of " + path_ + " failed while writing its new values in place (" +
                  e.what() + "); they are kept in " + journal.path() +
                  ", which the next open or update_ of the file writes in");
  }
}

std::unique_ptr<ReplacementFile> StoredArray::stage_data(const DataWriter& write_data,
                                                         const std::string& temp_suffix) const {
  std::shared_ptr<const File> old = file_->current();
  if (!writable_ || !old->writable()) {
    throw ReadOnlyError("cannot replace the contents of " + path_ + ": it was opened read-only");
  }
  const IoPolicy io = io_policy();
  const uint64_t size = old->size();
  auto next = std::make_unique<ReplacementFile>(file_->path(), size, temp_suffix);
  // Everything but this array's data, as it is now: the header and the
  // other arrays of the file, with their latest updates.
  const auto [begin, end] = layout_.data_bytes(info_);
  copy_range(*old, *next->file(), 0, begin, io);
  copy_range(*old, *next->file(), end, size, io);
  StoredArray staged(SharedFile::unlisted(next->file(), /*scratch=*/false), path_, info_, layout_,
                     true);
  // Test hook (crash_if): a kill once the first block of the new data is written. Installed
  // only under JASK_TEST_CRASH_AT, so an update's writes call no hook otherwise.
  if (std::getenv("JASK_TEST_CRASH_AT") != nullptr) {
    staged.on_write_ = [](const void*, size_t, uint64_t) { crash_if("replace_half_written"); };
  }
  write_data(staged);
  return next;
}

std::vector<std::shared_ptr<SharedFile>> files_of(const std::vector<ArrayRef>& arrays) {
  std::vector<std::shared_ptr<SharedFile>> files;
  for (const ArrayRef& a : arrays)
    if (a) files.push_back(a->shared_file());
  return files;
}

std::vector<std::shared_ptr<SharedFile>> files_of_handles(const std::vector<int32_t>& handles) {
  std::vector<ArrayRef> arrays;
  for (int32_t h : handles) arrays.push_back(Registry::instance().find(h));
  return files_of(arrays);
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

ArrayRef Registry::find(int32_t handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(handle);
  return it == entries_.end() ? nullptr : it->second.array;
}

void Registry::acquire(int32_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(handle);
  if (it == entries_.end()) throw ValueError("unknown array handle " + std::to_string(handle));
  ++it->second.owners;
  it->second.run = kNoRun;  // Python's now, whatever becomes of its program
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

void Registry::made_in_run(int32_t handle, int64_t run) {
  ArrayRef doomed;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(handle);
  if (it == entries_.end()) return;
  if (std::find(failed_runs_.begin(), failed_runs_.end(), run) == failed_runs_.end()) {
    it->second.run = run;
  } else if (it->second.owners == 0) {
    doomed = std::move(it->second.array);
    entries_.erase(it);
  }
}

void Registry::fail_run(int64_t run) {
  std::vector<ArrayRef> doomed;  // destroyed outside the lock (declared before it)
  std::lock_guard<std::mutex> lock(mu_);
  if (std::find(failed_runs_.begin(), failed_runs_.end(), run) == failed_runs_.end()) {
    failed_runs_.push_back(run);
    if (failed_runs_.size() > kFailedRunsKept) failed_runs_.pop_front();
  }
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.run == run && it->second.owners == 0) {
      doomed.push_back(std::move(it->second.array));
      it = entries_.erase(it);
    } else {
      ++it;
    }
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
