#include "storage/readahead.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "base/errors.hpp"
#include "base/memory_budget.hpp"
#include "io/file.hpp"
#include "storage/io_config.hpp"

namespace jask {
namespace {

// A range of a file being read (or read) into a buffer of its own.
struct Window {
  std::shared_ptr<const File> file;
  uint64_t offset = 0;
  size_t bytes = 0;
  FileVersion version;  // before the read started
  AlignedBuffer buffer;
  size_t shift = 0;  // the bytes start here: offset mod 4096, so the read goes direct
  int64_t reserved = 0;
  std::thread reader;
  std::exception_ptr error;

  ~Window() {
    if (reader.joinable()) reader.join();
    unreserve_budget(reserved);
  }
};

class Readahead {
 public:
  static Readahead& instance() {
    static Readahead r;
    return r;
  }
  // The engine's I/O configuration first, so that it outlives the window's
  // reader at exit (statics go in reverse order of construction).
  Readahead() { (void)io_policy(); }

  void read(const StoredArray& array, void* dst, int64_t first, int64_t count) {
    std::shared_ptr<const File> file = array.file();
    const size_t isz = itemsize(array.info().dtype);
    const uint64_t offset = array.byte_of(first);
    const size_t n = static_cast<size_t>(count) * isz;
    std::lock_guard<std::mutex> lock(mu_);
    if (!take(file, offset, n, dst)) array.read_elems(dst, first, count);
    const bool continues = last_file_.lock() == file && last_end_ == offset;
    last_file_ = file;
    last_end_ = offset + n;
    const uint64_t data_end = array.byte_of(array.info().numel());
    if (continues && n > 0 && offset + n < data_end)
      start(file, offset + n, std::min<uint64_t>(n, data_end - (offset + n)));
  }

  void drop() {
    std::lock_guard<std::mutex> lock(mu_);
    release(/*served=*/false);
    last_file_.reset();
  }

  ReadaheadStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    ReadaheadStats s = stats_;
    s.held_bytes = window_ ? window_->reserved : 0;
    return s;
  }

 private:
  // Copies the window into dst if it holds exactly these bytes of this file
  // at its current version; frees the window either way.
  bool take(const std::shared_ptr<const File>& file, uint64_t offset, size_t n, void* dst) {
    if (!window_) return false;
    if (window_->reader.joinable()) window_->reader.join();
    bool match = window_->file == file && window_->offset == offset && window_->bytes == n &&
                 !window_->error;
    try {
      match = match && file->version() == window_->version;
    } catch (const IoError&) {
      match = false;  // the read that wants the bytes goes to the file and reports it
    }
    if (match) std::memcpy(dst, window_->buffer.data() + window_->shift, n);
    release(match);
    return match;
  }

  void release(bool served) {
    if (!window_) return;
    ++(served ? stats_.served : stats_.dropped);
    window_.reset();
  }

  void start(const std::shared_ptr<const File>& file, uint64_t offset, uint64_t bytes) {
    const size_t shift = offset % kIoAlignment;
    const auto need = static_cast<int64_t>(bytes + shift + kIoAlignment);
    if (need > memory_budget() / 4) return;  // the budget is short: no readahead
    FileVersion version = file->version();
    if (!version.quiet()) return;  // a write in flight: what it leaves is not known yet
    auto w = std::make_unique<Window>();
    w->file = file;
    w->offset = offset;
    w->bytes = static_cast<size_t>(bytes);
    w->version = version;
    w->shift = shift;
    reserve_budget(need);
    w->reserved = need;
    w->buffer = AlignedBuffer(static_cast<size_t>(need));
    Window* raw = w.get();
    const IoPolicy io = io_policy();
    w->reader = std::thread([raw, io] {
      try {
        raw->file->read_at(raw->buffer.data() + raw->shift, raw->bytes, raw->offset, io);
      } catch (...) {
        raw->error = std::current_exception();  // the read that wants it reads the file itself
      }
    });
    window_ = std::move(w);
    ++stats_.started;
  }

  std::mutex mu_;
  std::unique_ptr<Window> window_;
  std::weak_ptr<const File> last_file_;
  uint64_t last_end_ = 0;
  ReadaheadStats stats_;
};

}  // namespace

void read_elems_ahead(const StoredArray& array, void* dst, int64_t first, int64_t count) {
  if (array.chunked() != nullptr) return array.read_elems(dst, first, count);
  Readahead::instance().read(array, dst, first, count);
}

void drop_readahead() { Readahead::instance().drop(); }

ReadaheadStats readahead_stats() { return Readahead::instance().stats(); }

}  // namespace jask
