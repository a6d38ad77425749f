// RAII file with positioned I/O. The aligned middle of each request goes
// through an O_DIRECT descriptor (no page cache, full disk bandwidth); the
// unaligned edges, and every request on file systems that refuse O_DIRECT,
// go through an ordinary buffered descriptor.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace jask {

inline constexpr size_t kIoAlignment = 4096;

// How large reads go to the disk. Direct reads bypass the page cache (the
// fastest on local NVMe); buffered reads, several at once with the kernel's
// readahead, are faster on some virtual disks. kAuto times large reads both
// ways (a ReadCalibration) and keeps the faster.
enum class ReadMode { kAuto, kDirect, kBuffered };

// kAuto's measurement, shared by every read under one policy: reads of
// kCalibrationBytes or more run in phases, all of a phase one way (direct,
// buffered, direct, ...), until each way has read kCalibrationTotal bytes;
// then mode() becomes the way with more bytes per second of its phases' wall time.
// Under a memory cgroup limit (`headroom`, io/memory_cgroup.hpp) kAuto
// settles on kDirect at its first read, unmeasured: buffered reads there fill
// the limit with page cache and pay its reclaim, and a fair measurement of
// them had to fill it first (up to 2 GiB read buffered: W1, W2 and W5 capped
// 5-30% slower than direct throughout, once direct reads went to huge pages).
// Thread-safe.
class ReadCalibration {
 public:
  using HeadroomFn = int64_t (*)();  // bytes the page cache may still grow; -1: no limit
  explicit ReadCalibration(ReadMode mode = ReadMode::kAuto, HeadroomFn headroom = nullptr)
      : headroom_(headroom) {
    reset(mode);
  }
  ReadCalibration(const ReadCalibration&) = delete;
  ReadCalibration& operator=(const ReadCalibration&) = delete;

  // Starts over in `mode` (kAuto measures again from nothing).
  void reset(ReadMode mode);
  // kAuto until the measurement settles, then kDirect or kBuffered.
  ReadMode mode() const { return static_cast<ReadMode>(mode_.load(std::memory_order_relaxed)); }
  // Whether reads are buffered because reset() asked for it or the file
  // system refused O_DIRECT, not because kAuto measured large reads faster
  // that way (File::read_at_through still reads short runs direct then).
  bool buffered_by_request() const { return buffered_by_request_.load(std::memory_order_relaxed); }
  // A calibrating read starts: true if it goes direct (its phase's way).
  bool begin_read();
  // It ended, `ok` false if the file system refused O_DIRECT (kAuto then
  // settles on buffered); `n` bytes moved.
  void end_read(bool direct, bool ok, size_t n);

  static constexpr size_t kCalibrationBytes = 8 << 20;
  static constexpr double kCalibrationTotal = 256.0 * (1 << 20);

 private:
  using Clock = std::chrono::steady_clock;
  void close_busy(Clock::time_point now);

  std::atomic<int> mode_{static_cast<int>(ReadMode::kAuto)};
  std::atomic<bool> buffered_by_request_{false};
  std::mutex mu_;
  bool phase_direct_ = true;
  double phase_bytes_ = 0;
  int in_flight_ = 0;
  bool phase_started_ = false;  // busy_since_ is this phase's first read's start
  HeadroomFn headroom_;
  bool limit_checked_ = false;  // whether the first read since reset() looked for a limit
  Clock::time_point busy_since_;
  double bytes_[2] = {0, 0}, busy_seconds_[2] = {0, 0};  // [buffered, direct]
};

struct IoCounters {
  std::atomic<uint64_t> direct_bytes{0};
  std::atomic<uint64_t> buffered_bytes{0};
  // Bytes asked of read_at and write_at (each request once, however it is
  // split), headers (IoPolicy::header) left out: what jask.stats() reports.
  std::atomic<uint64_t> read_bytes{0};
  std::atomic<uint64_t> written_bytes{0};
};

// How one read or write reaches the disk, chosen by the layer above (the
// engine's configuration, storage/io_config.hpp) and passed to every call:
// io/ keeps no process-wide state. The default is direct I/O where the file
// system allows it, nothing measured, nothing counted.
struct IoPolicy {
  bool direct = true;  // false: every request buffered
  ReadMode read_mode = ReadMode::kDirect;
  ReadCalibration* calibration = nullptr;  // kAuto's measurement; kAuto without one reads direct
  IoCounters* counters = nullptr;          // bytes moved each way, if not null
  bool header = false;  // a file's header: kept out of counters' read_bytes and written_bytes
  // kBuffered was asked for (or O_DIRECT refused); false where it is kAuto's
  // measurement, of large reads: read_at_through then still reads short runs direct.
  bool buffered_by_request = true;
};

// Bytes of every AlignedBuffer alive now, and the most at once since the
// last reset.
int64_t buffer_bytes();
int64_t peak_buffer_bytes();
void reset_peak_buffer_bytes();

// The kernel's transparent huge page (hpage_pmd_size; 2 MiB where it does
// not say).
size_t huge_page_bytes();

// Buffer aligned for O_DIRECT; owns its memory. Mapped directly from the
// kernel and unmapped on destruction, so block memory goes back to the
// system after each op (malloc's arenas would keep it). One of a huge page or
// more starts at a multiple of huge_page_bytes() and asks for transparent huge
// pages, so a direct read into it goes to the disk in the largest requests
// the device takes (io/file.cpp's map_pages).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  std::byte* data() { return ptr_.get(); }
  const std::byte* data() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  struct Unmap {
    size_t length;
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Unmap> ptr_{nullptr, Unmap{0}};
  size_t size_ = 0;
};

// kCreate: created if missing, its bytes kept (FileTable truncates a file
// only once it holds its write lock, so a file another process writes is
// never cut short).
enum class OpenMode { kReadOnly, kReadWrite, kCreateExclusive, kCreateTruncate, kCreate };

// Which file an open descriptor reaches: two paths (a symlink, a hard link,
// "a/../b") name one file exactly when these are equal.
struct FileIdentity {
  uint64_t device = 0, inode = 0;
  auto operator<=>(const FileIdentity&) const = default;
};

// What a file's bytes are now, as far as this process can tell: writes made
// through this File (started and ended: one in flight shows as unequal),
// and the inode's size and change times (a write through another descriptor,
// or another process, changes them). Equal versions taken before and after a
// read mean no write of this File overlapped it.
struct FileVersion {
  uint64_t writes_started = 0, writes_ended = 0;
  uint64_t size = 0;
  int64_t ctime_ns = 0, mtime_ns = 0;
  bool quiet() const { return writes_started == writes_ended; }
  bool operator==(const FileVersion&) const = default;
};

// Bytes a read-only File shows in place of its own: the new values of a
// committed update not yet written into the file (storage/journal.hpp), read
// without writing the file.
class ReadOverlay {
 public:
  virtual ~ReadOverlay() = default;
  // Overwrites the bytes of [offset, offset + n) the overlay covers in `dst`.
  virtual void apply(std::byte* dst, size_t n, uint64_t offset) const = 0;
};

// Whether a path's last component may be a symbolic link.
enum class Links { kFollow, kRefuse };

class File {
 public:
  // kCreateExclusive makes a private (0600) file; kCreateTruncate and kCreate make a
  // user-visible file (0644 less umask). kRefuse: a symbolic link at `path` is an IoError.
  File(const std::string& path, OpenMode mode, Links links = Links::kFollow);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  void read_at(void* dst, size_t n, uint64_t offset, const IoPolicy& io) const;
  // read_at for a short read whose memory is not at the file offset's
  // alignment (mod 4096), which read_at would serve through the page cache
  // (a strided tile's rows): reads the 4096-aligned bytes around it into
  // `bounce` with O_DIRECT and copies them out, when direct reads are on, the
  // mode is not kBuffered by request (kAuto's choice of kBuffered, made on
  // large reads, still reads these direct: readahead around short runs reads
  // the file about twice), the aligned bytes fit `bounce` and lie within the
  // file. Otherwise exactly read_at.
  void read_at_through(void* dst, size_t n, uint64_t offset, const IoPolicy& io,
                       AlignedBuffer& bounce) const;
  // read_at_through without the bounce buffer or its copy, for memory at the
  // file offset's alignment (mod 4096) whose surrounding pages the caller
  // owns: [dst - offset % 4096, dst + n rounded up to 4096) receives the
  // aligned bytes around the read with O_DIRECT (the bytes outside
  // [dst, dst + n) become the file's too), where read_at_through would read
  // them direct. Otherwise exactly read_at.
  void read_in_place(void* dst, size_t n, uint64_t offset, const IoPolicy& io) const;
  void write_at(const void* src, size_t n, uint64_t offset, const IoPolicy& io) const;
  uint64_t size() const;
  FileIdentity identity() const;
  FileVersion version() const;
  // Bytes of disk the file occupies (holes of a sparse file take none).
  uint64_t allocated_bytes() const;
  void resize(uint64_t bytes) const;
  void sync() const;
  // Exactly these permission bits (e.g. 0644); the umask does not apply.
  void set_permissions(unsigned mode) const;
  // rename(2)s the file over `target`, atomically replacing what was there,
  // and names it `shown_as` in messages from then on (the path the user
  // gave, which may be a symlink to `target`). Only while no other thread
  // uses this File: path() changes.
  void rename_over(const std::string& target, const std::string& shown_as);
  // flock(LOCK_EX | LOCK_NB) on the open file: false if another open file
  // description (another process's open) holds it. Released when this File
  // closes. File systems without flock() report true (nothing to hold).
  bool try_lock_exclusive() const;
  bool writable() const { return writable_; }
  // Every read from now on sees `overlay`'s bytes over the file's. Only on a
  // read-only File no other thread uses yet.
  void set_overlay(std::shared_ptr<const ReadOverlay> overlay);
  bool has_direct() const { return direct_fd_ >= 0 && !direct_failed_.load(); }
  const std::string& path() const { return path_; }

 private:
  // read_at of the file's own bytes (no overlay).
  void read_own(std::byte* dst, size_t n, uint64_t offset, const IoPolicy& io) const;
  void buffered_read(std::byte* dst, size_t n, uint64_t offset, IoCounters* counters) const;
  // Several buffered reads at once.
  void parallel_buffered_read(std::byte* dst, size_t n, uint64_t offset,
                              IoCounters* counters) const;
  bool parallel_direct_read(std::byte* dst, size_t n, uint64_t offset, IoCounters* counters) const;
  // The aligned middle of a read under kAuto: one calibrating read.
  void calibrating_read(std::byte* dst, size_t n, uint64_t offset, const IoPolicy& io) const;
  void buffered_write(const std::byte* src, size_t n, uint64_t offset, IoCounters* counters) const;
  bool try_direct_read(std::byte* dst, size_t n, uint64_t offset, IoCounters* counters) const;
  // Whether read_at_through and read_in_place read the 4096-aligned bytes
  // around a read of n bytes, ending at aligned_end, direct (see read_at_through).
  bool reads_around_direct(size_t n, uint64_t aligned_end, const IoPolicy& io) const;
  bool try_direct_write(const std::byte* src, size_t n, uint64_t offset,
                        IoCounters* counters) const;

  std::string path_;
  int fd_ = -1;
  int direct_fd_ = -1;
  bool writable_ = false;
  std::shared_ptr<const ReadOverlay> overlay_;
  mutable std::atomic<bool> direct_failed_{false};
  mutable std::atomic<uint64_t> writes_started_{0}, writes_ended_{0};
};

// " (held by process <pid>)" for the process holding a flock() on the file
// `id`, from /proc/locks; "" when not known.
std::string lock_holder(FileIdentity id);

// The next contents of `target`, built beside it: a new file
// <target>.jask-tmp-<pid>-<random> (or <target><temp_suffix>) in the same directory (rename(2) is
// atomic only within one file system) with the target's permission bits. commit() renames it over
// the target, so a crash at any moment leaves at the target path either the old file, whole, or the
// new one; after sync(), a power loss too. Removed on destruction unless committed. The new file is
// flock()ed before it is renamed, so the file at the target path is always
// locked by its writer (see FileTable::open).
class ReplacementFile {
 public:
  // A symlink `target` keeps the link; the file it points to is replaced.
  // The new file starts as `size` bytes of zeros (sparse).
  ReplacementFile(const std::string& target, uint64_t size, const std::string& temp_suffix = "");
  ~ReplacementFile();
  ReplacementFile(const ReplacementFile&) = delete;
  ReplacementFile& operator=(const ReplacementFile&) = delete;

  const std::shared_ptr<File>& file() const { return file_; }
  const std::string& temp_path() const { return temp_path_; }
  // The target with symlinks followed: the name rename() replaces.
  const std::string& resolved() const { return resolved_; }
  // fdatasync of the new file: its contents survive a power loss once renamed.
  void sync() const { file_->sync(); }
  // Renames the file over the target. Returns the file, now reached through
  // the target path.
  std::shared_ptr<File> commit();
  // fsync of the target's directory: makes the rename itself survive a
  // power loss. Separate from commit() so the caller can install the new
  // file first: after the rename, the old one is gone from the path even if
  // this throws.
  void sync_directory() const;
  // Leaves the new file on disk if this object goes uncommitted (a
  // transaction's commit record names it: recovery renames it in).
  void keep_on_disk() { committed_ = true; }

 private:
  std::string target_;    // as given, for messages
  std::string resolved_;  // symlinks followed: the name rename() replaces
  std::string temp_path_;
  std::shared_ptr<File> file_;
  bool committed_ = false;
};

// fsync of a directory (makes renames and new names in it survive a power loss).
void sync_directory(const std::string& dir);

// Removes replacement files of `target` (<target>.jask-tmp-<pid>-*) whose
// process no longer exists, as a SIGKILL during update_ leaves them. Files of
// live processes are kept: they may be mid-update. Best effort (an unreadable
// directory removes nothing); returns how many were removed.
int remove_stale_replacements(const std::string& target);

}  // namespace jask
