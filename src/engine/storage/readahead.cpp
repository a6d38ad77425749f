#include "storage/readahead.hpp"

#include <pthread.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/concurrency.hpp"
#include "base/errors.hpp"
#include "base/memory_budget.hpp"
#include "io/file.hpp"
#include "storage/io_config.hpp"

namespace jask {
namespace {

// Reads of the loop held ahead: the next two keep the disk busy while the
// caller takes one.
constexpr uint64_t kReadsAhead = 2;
// A read longer than this is held as parts of at most this size, each read on
// its own thread: the caller copies a part as soon as it has arrived, and each
// part taken starts the next one at once, so the disk never waits for a whole
// read to be taken (a layer loop of 64 MiB layers keeps up to 16 parts in
// flight instead of one window). W7's scan over 64 layers of 4096x4096 float32,
// cold, budget 256 MiB, against the same scan without readahead: one 64 MiB
// window 52% of its bound; parts of 16 MiB within half the budget 1.10-1.37x
// the reads alone, of 8 MiB within three quarters 1.15-1.18x, of 4 MiB
// 1.22-1.24x (a busy machine).
constexpr uint64_t kPartBytes = 8 << 20;
// The parts may hold this much of what the budget leaves the calling call: any
// other kernel call drops them first, so they never keep blocks from a call.
constexpr double kBudgetShare = 0.75;

// A range of a file being read (or read) into a buffer of its own.
struct Part {
  std::shared_ptr<const File> file;
  uint64_t offset = 0;
  size_t bytes = 0;
  FileVersion version;  // before the read started
  AlignedBuffer buffer;
  size_t shift = 0;  // the bytes start here: offset mod 4096, so the read goes direct
  int64_t reserved = 0;
  std::thread reader;
  std::exception_ptr error;

  ~Part() {
    if (reader.joinable()) reader.join();
    unreserve_budget(reserved);
  }
};

// The loop's reads are [start + j * length, start + (j + 1) * length) up to
// data_end; each is held as ceil(length / kPartBytes) parts.
struct Stream {
  std::shared_ptr<const File> file;
  uint64_t length = 0, part = 0;
  uint64_t data_end = 0;
  uint64_t next = 0;     // the next part starts here
  uint64_t in_read = 0;  // ... this many bytes into its read
};

class Readahead {
 public:
  static Readahead& instance() {
    static Readahead r;
    return r;
  }
  // The engine's I/O configuration first, so that it outlives the parts'
  // readers at exit (statics go in reverse order of construction).
  Readahead() {
    (void)io_policy();
    pthread_atfork([] { instance().mu_.lock(); }, [] { instance().mu_.unlock(); },
                   [] { instance().forget_parts_in_forked_child(); });
  }

  void read(const StoredArray& array, void* dst, int64_t first, int64_t count) {
    std::shared_ptr<const File> file = array.file();
    const size_t isz = itemsize(array.info().dtype);
    const uint64_t offset = array.byte_of(first);
    const size_t n = static_cast<size_t>(count) * isz;
    std::lock_guard<std::mutex> lock(mu_);
    const bool served = take(file, offset, n, static_cast<std::byte*>(dst));
    if (!served) array.read_elems(dst, first, count);
    // A loop continues the last read, or starts at the array's first element.
    const int64_t numel = array.info().numel();
    const bool continues =
        (last_file_.lock() == file && last_end_ == offset) || (first == 0 && count < numel);
    last_file_ = file;
    last_end_ = offset + n;
    if (!continues || n == 0 || !enabled_) return;
    if (!served) {  // a new loop (or the first read ahead of this one)
      release_all();
      stream_ =
          Stream{file, n, std::min<uint64_t>(n, kPartBytes), array.byte_of(numel), offset + n, 0};
      // Parts of equal size (but the last of a read): ceil(n / kPartBytes) of them.
      const uint64_t parts = (n + kPartBytes - 1) / kPartBytes;
      stream_.part = (n + parts - 1) / parts;
    }
    fill();
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
    for (const auto& p : parts_) s.held_bytes += p->reserved;
    for (const Spare& b : spare_) s.held_bytes += b.reserved;
    return s;
  }

 private:
  // Copies the parts holding exactly these bytes of this file (at its current
  // version) into dst, each as it arrives, and frees them; frees every part
  // and returns false otherwise (the caller reads the file).
  bool take(const std::shared_ptr<const File>& file, uint64_t offset, size_t n, std::byte* dst) {
    if (parts_.empty() || n == 0) return false;
    // The front parts must cover [offset, offset + n), ending on a part's end.
    size_t count = 0;
    uint64_t covered = 0;
    for (const auto& p : parts_) {
      if (covered >= n) break;
      if (p->file != file || p->offset != offset + covered) break;
      covered += p->bytes;
      ++count;
    }
    if (covered != n) {
      release_all();
      return false;
    }
    for (size_t i = 0; i < count; ++i) {
      Part& p = *parts_.front();
      if (p.reader.joinable()) p.reader.join();
      bool ok = !p.error;
      try {
        ok = ok && file->version() == p.version;
      } catch (const IoError&) {
        ok = false;  // the read that wants the bytes goes to the file and reports it
      }
      if (!ok) {
        release_all();
        return false;
      }
      // The caller waits for this copy with nothing else to run (XLA's program
      // is inside this call): every core takes a share.
      copy_on_all_cores(dst + (p.offset - offset), p.buffer.data() + p.shift, p.bytes);
      // The loop's next part takes this buffer, already mapped and faulted in,
      // and its share of the budget.
      spare_.push_back(Spare{std::move(p.buffer), p.reserved});
      p.reserved = 0;
      parts_.pop_front();
      fill();
    }
    ++stats_.served;
    return true;
  }

  // fork() copies memory, not threads: the parts' readers are not in the child
  // (joining one would wait forever), so the child leaves its parts as they are,
  // never joined nor freed (pages its parent has too), and gives back their
  // budget. Runs in the child, with mu_ held since before the fork.
  void forget_parts_in_forked_child() {
    for (auto& p : parts_) {
      unreserve_budget(p->reserved);
      (void)p.release();
    }
    parts_.clear();
    for (const Spare& b : spare_) unreserve_budget(b.reserved);
    spare_.clear();
    stream_ = Stream{};
    last_file_.reset();
    mu_.unlock();
  }

  void release_all() {
    stats_.dropped += parts_.size();
    parts_.clear();
    for (const Spare& b : spare_) unreserve_budget(b.reserved);
    spare_.clear();
    stream_ = Stream{};
  }

  // Starts the stream's next parts, up to kReadsAhead reads ahead, within the
  // budget and the array's data.
  void fill() {
    if (!stream_.file) return;
    uint64_t ahead = 0;
    for (const auto& p : parts_) ahead += p->bytes;
    while (stream_.next < stream_.data_end && ahead < kReadsAhead * stream_.length) {
      const uint64_t bytes = std::min(
          {stream_.part, stream_.length - stream_.in_read, stream_.data_end - stream_.next});
      if (!start(bytes)) return;
      ahead += bytes;
      stream_.next += bytes;
      stream_.in_read += bytes;
      if (stream_.in_read == stream_.length) stream_.in_read = 0;
    }
  }

  // Starts reading the stream's next part; false where the budget or a write
  // in flight says no.
  bool start(uint64_t bytes) {
    const std::shared_ptr<const File>& file = stream_.file;
    const uint64_t offset = stream_.next;
    const size_t shift = offset % kIoAlignment;
    // Every part's buffer has one size, so any spare fits any part.
    const auto need = static_cast<int64_t>(stream_.part + 2 * kIoAlignment);
    int64_t held = 0;
    for (const auto& p : parts_) held += p->reserved;
    for (const Spare& b : spare_) held += b.reserved;
    auto reuse = std::find_if(spare_.begin(), spare_.end(), [&](const Spare& b) {
      return b.buffer.size() == static_cast<size_t>(need);
    });
    // The reserved parts are out of memory_budget() already: kBudgetShare of what the
    // budget leaves with them back.
    if (reuse == spare_.end() && static_cast<double>(held + need) >
                                     static_cast<double>(memory_budget() + held) * kBudgetShare)
      return false;
    FileVersion version = file->version();
    if (!version.quiet()) return false;  // a write in flight: what it leaves is not known yet
    auto p = std::make_unique<Part>();
    p->file = file;
    p->offset = offset;
    p->bytes = static_cast<size_t>(bytes);
    p->version = version;
    p->shift = shift;
    if (reuse != spare_.end()) {
      p->buffer = std::move(reuse->buffer);
      p->reserved = reuse->reserved;
      spare_.erase(reuse);
    } else {
      reserve_budget(need);
      p->reserved = need;
      p->buffer = AlignedBuffer(static_cast<size_t>(need));
    }
    Part* raw = p.get();
    IoPolicy io = io_policy();
    // Parts are read beside the caller's compute: direct reads leave it the
    // cores (a buffered read copies every byte out of the page cache), so
    // `auto` reads them direct rather than by its measurement of reads alone.
    if (io.read_mode == ReadMode::kAuto) io.read_mode = ReadMode::kDirect;
    p->reader = std::thread([raw, io] {
      try {
        raw->file->read_at(raw->buffer.data() + raw->shift, raw->bytes, raw->offset, io);
      } catch (...) {
        raw->error = std::current_exception();  // the read that wants it reads the file itself
      }
    });
    parts_.push_back(std::move(p));
    ++stats_.started;
    return true;
  }

  struct Spare {
    AlignedBuffer buffer;
    int64_t reserved = 0;
  };

  std::mutex mu_;
  std::deque<std::unique_ptr<Part>> parts_;  // in file order, from the stream's next read
  std::vector<Spare> spare_;                 // buffers of parts taken, for the next parts
  Stream stream_;
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
