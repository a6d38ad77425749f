// RAII file with positioned I/O. The aligned middle of each request goes
// through an O_DIRECT descriptor (no page cache, full disk bandwidth); the
// unaligned edges, and every request on file systems that refuse O_DIRECT,
// go through an ordinary buffered descriptor.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace jask {

inline constexpr size_t kIoAlignment = 4096;

// Process-wide switch, used by tests to exercise the buffered fallback.
void set_direct_io_enabled(bool enabled);
bool direct_io_enabled();

// How large reads go to the disk. Direct reads bypass the page cache (the
// fastest on local NVMe); buffered reads, several at once with the kernel's
// readahead, are faster on some virtual disks. kAuto times the first large
// read both ways (half each) and keeps the faster for the process.
enum class ReadMode { kAuto, kDirect, kBuffered };
void set_read_mode(ReadMode mode);
ReadMode read_mode();

struct IoCounters {
  std::atomic<uint64_t> direct_bytes{0};
  std::atomic<uint64_t> buffered_bytes{0};
};
IoCounters& io_counters();

// Buffer aligned for O_DIRECT; owns its memory. Mapped directly from the
// kernel and unmapped on destruction, so block memory goes back to the
// system after each op (malloc's arenas would keep it).
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

enum class OpenMode { kReadOnly, kReadWrite, kCreateExclusive, kCreateTruncate };

class File {
 public:
  // kCreateExclusive makes a private (0600) file; kCreateTruncate makes a
  // user-visible file (0644 less umask).
  File(const std::string& path, OpenMode mode);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  void read_at(void* dst, size_t n, uint64_t offset) const;
  void write_at(const void* src, size_t n, uint64_t offset) const;
  void write_all(const void* src, size_t n, uint64_t offset) const { write_at(src, n, offset); }
  uint64_t size() const;
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
  bool writable() const { return writable_; }
  bool has_direct() const { return direct_fd_ >= 0 && !direct_failed_.load(); }
  const std::string& path() const { return path_; }

 private:
  void buffered_read(std::byte* dst, size_t n, uint64_t offset) const;
  // Several buffered reads at once; large ranges are then dropped from the
  // page cache (read once: the cache would only hold them against a memory cap).
  void parallel_buffered_read(std::byte* dst, size_t n, uint64_t offset) const;
  bool parallel_direct_read(std::byte* dst, size_t n, uint64_t offset) const;
  void buffered_write(const std::byte* src, size_t n, uint64_t offset) const;
  bool try_direct_read(std::byte* dst, size_t n, uint64_t offset) const;
  bool try_direct_write(const std::byte* src, size_t n, uint64_t offset) const;

  std::string path_;
  int fd_ = -1;
  int direct_fd_ = -1;
  bool writable_ = false;
  mutable std::atomic<bool> direct_failed_{false};
};

// The next contents of `target`, built beside it: a new file
// <target>.jask-tmp-<pid>-<random> in the same directory (rename(2) is atomic
// only within one file system) with the target's permission bits. commit()
// renames it over the target, so a crash at any moment leaves at the target
// path either the old file, whole, or the new one; with `durable`, a power
// loss too. Removed on destruction unless committed.
class ReplacementFile {
 public:
  // A symlink `target` keeps the link; the file it points to is replaced.
  // The new file starts as `size` bytes of zeros (sparse).
  ReplacementFile(const std::string& target, uint64_t size);
  ~ReplacementFile();
  ReplacementFile(const ReplacementFile&) = delete;
  ReplacementFile& operator=(const ReplacementFile&) = delete;

  const std::shared_ptr<File>& file() const { return file_; }
  // Renames the file over the target (after an fdatasync when `durable`).
  // Returns the file, now reached through the target path.
  std::shared_ptr<File> commit(bool durable);
  // fsync of the target's directory: makes the rename itself survive a
  // power loss. Separate from commit() so the caller can install the new
  // file first: after the rename, the old one is gone from the path even if
  // this throws.
  void sync_directory() const;

 private:
  std::string target_;    // as given, for messages
  std::string resolved_;  // symlinks followed: the name rename() replaces
  std::string temp_path_;
  std::shared_ptr<File> file_;
  bool committed_ = false;
};

// Removes replacement files of `target` (<target>.jask-tmp-<pid>-*) whose
// process no longer exists, as a SIGKILL during update_ leaves them. Files of
// live processes are kept: they may be mid-update. Best effort (an unreadable
// directory removes nothing); returns how many were removed.
int remove_stale_replacements(const std::string& target);

}  // namespace jask
