#include "storage/readahead.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/errors.hpp"
#include "base/memory_budget.hpp"
#include "io/file.hpp"
#include "storage/io_config.hpp"

namespace jask {
namespace {

// Windows in flight: one 16 MiB request stream leaves a disk idle between
// requests; two keep it busy while the caller takes the first.
constexpr size_t kWindows = 2;

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
    if (!continues || n == 0 || !enabled_) return;
    // The next windows of n bytes, up to the end of the array's data.
    const uint64_t data_end = array.byte_of(array.info().numel());
    uint64_t next =
        windows_.empty() ? offset + n : windows_.back()->offset + windows_.back()->bytes;
    while (windows_.size() < kWindows && next < data_end) {
      const uint64_t bytes = std::min<uint64_t>(n, data_end - next);
      if (!start(file, next, bytes)) break;
      next += bytes;
    }
  }

  void set_enabled(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    enabled_ = on;
    release_all();
  }

  void drop() {
    std::lock_guard<std::mutex> lock(mu_);
    release_all();
    last_file_.reset();
  }

  ReadaheadStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    ReadaheadStats s = stats_;
    for (const auto& w : windows_) s.held_bytes += w->reserved;
    for (const Spare& b : spare_) s.held_bytes += b.reserved;
    return s;
  }

 private:
  // Copies the first window into dst if it holds exactly these bytes of this
  // file at its current version and frees it; frees every window otherwise.
  bool take(const std::shared_ptr<const File>& file, uint64_t offset, size_t n, void* dst) {
    if (windows_.empty()) return false;
    Window& w = *windows_.front();
    if (w.reader.joinable()) w.reader.join();
    bool match = w.file == file && w.offset == offset && w.bytes == n && !w.error;
    try {
      match = match && file->version() == w.version;
    } catch (const IoError&) {
      match = false;  // the read that wants the bytes goes to the file and reports it
    }
    if (!match) {
      release_all();
      return false;
    }
    std::memcpy(dst, w.buffer.data() + w.shift, n);
    // The next window of the loop takes this buffer, already mapped and faulted in, and its
    // share of the budget.
    spare_.push_back(Spare{std::move(w.buffer), w.reserved});
    w.reserved = 0;
    windows_.pop_front();
    ++stats_.served;
    return true;
  }

  void release_all() {
    stats_.dropped += windows_.size();
    windows_.clear();
    for (const Spare& b : spare_) unreserve_budget(b.reserved);
    spare_.clear();
  }

  // Starts reading a window; false where the budget or a write in flight says no.
  bool start(const std::shared_ptr<const File>& file, uint64_t offset, uint64_t bytes) {
    const size_t shift = offset % kIoAlignment;
    const auto need = static_cast<int64_t>(bytes + shift + kIoAlignment);
    int64_t held = 0;
    for (const auto& w : windows_) held += w->reserved;
    for (const Spare& b : spare_) held += b.reserved;
    auto reuse = std::find_if(spare_.begin(), spare_.end(), [&](const Spare& b) {
      return b.buffer.size() == static_cast<size_t>(need);
    });
    // The reserved windows are out of memory_budget() already: half of what the budget
    // leaves with them back (a loop over layers of a quarter of the budget gets one window).
    if (reuse == spare_.end() && held + need > (memory_budget() + held) / 2) return false;
    FileVersion version = file->version();
    if (!version.quiet()) return false;  // a write in flight: what it leaves is not known yet
    auto w = std::make_unique<Window>();
    w->file = file;
    w->offset = offset;
    w->bytes = static_cast<size_t>(bytes);
    w->version = version;
    w->shift = shift;
    if (reuse != spare_.end()) {
      w->buffer = std::move(reuse->buffer);
      w->reserved = reuse->reserved;
      spare_.erase(reuse);
    } else {
      reserve_budget(need);
      w->reserved = need;
      w->buffer = AlignedBuffer(static_cast<size_t>(need));
    }
    Window* raw = w.get();
    const IoPolicy io = io_policy();
    w->reader = std::thread([raw, io] {
      try {
        raw->file->read_at(raw->buffer.data() + raw->shift, raw->bytes, raw->offset, io);
      } catch (...) {
        raw->error = std::current_exception();  // the read that wants it reads the file itself
      }
    });
    windows_.push_back(std::move(w));
    ++stats_.started;
    return true;
  }

  struct Spare {
    AlignedBuffer buffer;
    int64_t reserved = 0;
  };

  std::mutex mu_;
  std::deque<std::unique_ptr<Window>> windows_;
  std::vector<Spare> spare_;  // buffers of windows taken, until the loop's next windows
  // On: from a cold file (data larger than RAM) it overlaps a loop's reads with its compute
  // (bench/readahead.py: 16 layers of 4096x4096 float32, 1.6 s off, 1.0-1.2 s on). From the
  // page cache it costs one more copy of the rows.
  bool enabled_ = true;
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

void set_readahead_enabled(bool enabled) { Readahead::instance().set_enabled(enabled); }

}  // namespace jask
