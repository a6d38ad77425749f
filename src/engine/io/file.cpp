#include "io/file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <new>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "base/errors.hpp"

namespace fs = std::filesystem;

namespace jask {
namespace {

// <target> + this + "<pid>-<random>" names a replacement file.
constexpr std::string_view kReplacementTag = ".jask-tmp-";

bool is_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kIoAlignment == 0; }

int open_flags(OpenMode mode) {
  switch (mode) {
    case OpenMode::kReadOnly: return O_RDONLY;
    case OpenMode::kReadWrite: return O_RDWR;
    case OpenMode::kCreateExclusive: return O_RDWR | O_CREAT | O_EXCL;
    case OpenMode::kCreateTruncate: return O_RDWR | O_CREAT | O_TRUNC;
    case OpenMode::kCreate: return O_RDWR | O_CREAT;
  }
  return O_RDONLY;
}

std::string random_hex() {
  std::random_device rd;
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(rd()));
  return buf;
}

// The pid in "<pid>-<random>", the tail of a replacement file's name.
std::optional<pid_t> owner_pid(std::string_view tail) {
  size_t dash = tail.find('-');
  if (dash == 0 || dash == std::string_view::npos) return std::nullopt;
  long pid = 0;
  auto [end, ec] = std::from_chars(tail.data(), tail.data() + dash, pid);
  // pid 0 and negative pids would make kill() address process groups.
  if (ec != std::errc() || end != tail.data() + dash || pid <= 0 || pid > INT_MAX)
    return std::nullopt;
  return static_cast<pid_t>(pid);
}

// Jask reads and writes regular files only: a FIFO would block, a device
// is not an array.
void refuse_non_regular(const struct stat& st, const std::string& path) {
  if (S_ISREG(st.st_mode)) return;
  if (S_ISDIR(st.st_mode)) throw DirectoryError(path + " is a directory, not a file");
  const char* kind = S_ISFIFO(st.st_mode)   ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "a special file";
  throw IoError(path + " is " + kind + ", not a regular file; Jask opens regular files only");
}

// Files are opened O_NONBLOCK (so a FIFO cannot block the open), then made blocking.
bool clear_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0;
}

bool same_inode(int fd, const struct stat& st) {
  struct stat other;
  return ::fstat(fd, &other) == 0 && other.st_dev == st.st_dev && other.st_ino == st.st_ino;
}

// EPERM means the process exists but belongs to another user.
bool process_exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

void count(IoCounters* counters, std::atomic<uint64_t> IoCounters::*field, size_t n) {
  if (counters != nullptr) (counters->*field).fetch_add(n, std::memory_order_relaxed);
}

// Calibration runs in phases of this many bytes, all reads of a phase one
// way: reads of several operands run at once, and timing a direct read while
// a buffered one competes with it measured the mix, not either way.
constexpr double kPhaseBytes = ReadCalibration::kCalibrationTotal / 2;

}  // namespace

// A phase's throughput is its bytes over its wall time, from its first read's
// start to its last read's end: the phases of one pipeline alternate, so
// compute falls on both alike, and a buffered phase's reads that the
// kernel's readahead has already fetched count as they do for the caller
// (busy time alone picked direct on a virtual disk where buffered reads were
// 14-30% faster end to end).
void ReadCalibration::reset(ReadMode mode) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_direct_ = true;
  phase_bytes_ = 0;
  phase_started_ = false;
  limit_checked_ = false;
  bytes_[0] = bytes_[1] = busy_seconds_[0] = busy_seconds_[1] = 0;
  mode_ = static_cast<int>(mode);
  buffered_by_request_ = mode == ReadMode::kBuffered;
}

bool ReadCalibration::begin_read() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!limit_checked_) {
    limit_checked_ = true;
    int expected = static_cast<int>(ReadMode::kAuto);
    if (headroom_ != nullptr && headroom_() >= 0)  // under a memory limit: direct, unmeasured
      mode_.compare_exchange_strong(expected, static_cast<int>(ReadMode::kDirect));
  }
  if (!phase_started_) {
    phase_started_ = true;
    busy_since_ = Clock::now();
  }
  ++in_flight_;
  return phase_direct_;
}

void ReadCalibration::close_busy(Clock::time_point now) {
  busy_seconds_[phase_direct_] += std::chrono::duration<double>(now - busy_since_).count();
  phase_started_ = false;
}

void ReadCalibration::end_read(bool direct, bool ok, size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  int expected = static_cast<int>(ReadMode::kAuto);
  const Clock::time_point now = Clock::now();
  --in_flight_;
  if (!ok) {
    if (mode_.compare_exchange_strong(expected, static_cast<int>(ReadMode::kBuffered)))
      buffered_by_request_ = true;  // direct reads cannot be had
    return;
  }
  // A read of the other way ending in this phase (it started in the last
  // one) counts to neither: each way's bytes are its closed phases' bytes,
  // over their wall times. (Counted to its way, it let a way reach the total
  // in the middle of a phase whose time was not yet added: buffered reads
  // measured at 3.6-4.4 GB/s, twice the disk, and auto settled buffered
  // where direct was 1.2-1.4x faster.)
  if (direct != phase_direct_) return;
  phase_bytes_ += static_cast<double>(n);
  if (phase_bytes_ < kPhaseBytes) return;
  bytes_[phase_direct_] += phase_bytes_;
  close_busy(now);
  phase_direct_ = !phase_direct_;
  phase_bytes_ = 0;
  if (bytes_[0] < kCalibrationTotal || bytes_[1] < kCalibrationTotal) return;
  const bool direct_faster = bytes_[1] / busy_seconds_[1] >= bytes_[0] / busy_seconds_[0];
  mode_.compare_exchange_strong(
      expected, static_cast<int>(direct_faster ? ReadMode::kDirect : ReadMode::kBuffered));
}

namespace {
std::atomic<int64_t> g_buffer_bytes{0}, g_peak_buffer_bytes{0};
}  // namespace

int64_t buffer_bytes() { return g_buffer_bytes; }
int64_t peak_buffer_bytes() { return g_peak_buffer_bytes; }
void reset_peak_buffer_bytes() { g_peak_buffer_bytes = g_buffer_bytes.load(); }

size_t huge_page_bytes() {
  static const size_t bytes = [] {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
    size_t n = 0;
    return in >> n && n >= kIoAlignment && (n & (n - 1)) == 0 ? n : size_t{2} << 20;
  }();
  return bytes;
}

namespace {

// `bytes` of anonymous memory; from a huge page up, aligned to one and
// marked for transparent huge pages (MADV_HUGEPAGE; a kernel without them
// refuses it, and the pages stay small). The device takes a bounded number
// of memory segments per request: a direct read into 4 KiB pages reached
// this machine's virtio disk as 512 KiB requests, into huge pages as 4 MiB
// ones (its max_sectors_kb), 2.1-2.5 GB/s against 1.4 GB/s from one file,
// and a capped W7 ran 1.41-1.61x faster.
void* map_pages(size_t bytes) {
  const int prot = PROT_READ | PROT_WRITE, flags = MAP_PRIVATE | MAP_ANONYMOUS;
  const size_t huge = huge_page_bytes();
  if (bytes < huge) {
    void* p = ::mmap(nullptr, bytes, prot, flags, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  void* raw = ::mmap(nullptr, bytes + huge, prot, flags, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + huge - 1) / huge * huge;
  if (aligned > start) ::munmap(raw, aligned - start);
  const size_t tail = huge - (aligned - start);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  auto* p = reinterpret_cast<void*>(aligned);
  ::madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

}  // namespace

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  size_t rounded = (bytes + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
  void* p = map_pages(rounded);
  if (p == nullptr) throw std::bad_alloc();
  ptr_ = std::unique_ptr<std::byte, Unmap>(static_cast<std::byte*>(p), Unmap{rounded});
  int64_t now = g_buffer_bytes += static_cast<int64_t>(rounded);
  int64_t peak = g_peak_buffer_bytes;
  while (now > peak && !g_peak_buffer_bytes.compare_exchange_weak(peak, now)) {
  }
}

void AlignedBuffer::Unmap::operator()(std::byte* p) const {
  if (p == nullptr) return;
  ::munmap(p, length);
  g_buffer_bytes -= static_cast<int64_t>(length);
}

File::File(const std::string& path, OpenMode mode, Links links) : path_(path) {
  // A FIFO or device is refused before it is opened (opening one may block
  // or act on the device); O_NONBLOCK and the fstat after the open cover a
  // path swapped for one in between.
  const int nofollow = links == Links::kRefuse ? O_NOFOLLOW : 0;
  struct stat st;
  if ((links == Links::kRefuse ? ::lstat : ::stat)(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      throw IoError(path + " is a symbolic link; Jask does not follow links to its own files");
    refuse_non_regular(st, path);
  }
  int flags = open_flags(mode) | O_CLOEXEC | O_NONBLOCK | nofollow;
  mode_t perms = mode == OpenMode::kCreateExclusive ? 0600 : 0644;
  fd_ = ::open(path.c_str(), flags, perms);
  if (fd_ < 0) {
    int err = errno;
    if (err == ELOOP && nofollow != 0)
      throw IoError(path + " is a symbolic link; Jask does not follow links to its own files");
    if (err == ENOENT) throw NotFoundError("No such file: " + path);
    if (err == EISDIR) throw DirectoryError(path + " is a directory, not a file");
    throw IoError(errno_message("open", path, err));
  }
  try {
    if (::fstat(fd_, &st) != 0) throw IoError(errno_message("fstat", path, errno));
    refuse_non_regular(st, path);
    if (!clear_nonblocking(fd_)) throw IoError(errno_message("fcntl", path, errno));
  } catch (...) {
    ::close(fd_);
    throw;
  }
  writable_ = mode != OpenMode::kReadOnly;
  // Pages Jask reads through the cache are used once: NOREUSE keeps them on
  // the inactive list, first to be reclaimed, so streaming a large array does
  // not push out the rest of the cache. (Dropping each range after reading
  // it with DONTNEED cost W1 7-10%: the disk idled while the pages went.)
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_NOREUSE);
  // Files that refuse O_DIRECT (tmpfs, some network file systems) keep the
  // buffered descriptor only.
  int dflags = (writable_ ? O_RDWR : O_RDONLY) | O_DIRECT | O_CLOEXEC | O_NONBLOCK | nofollow;
  direct_fd_ = ::open(path.c_str(), dflags);
  // Kept only if it is the file fd_ has open (the path may have changed).
  if (direct_fd_ >= 0 && !(same_inode(direct_fd_, st) && clear_nonblocking(direct_fd_))) {
    ::close(direct_fd_);
    direct_fd_ = -1;
  }
}

File::~File() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (fd_ >= 0) ::close(fd_);
}

void File::buffered_read(std::byte* dst, size_t n, uint64_t offset, IoCounters* counters) const {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, dst + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_message("pread", path_, errno));
    }
    if (r == 0) {
      throw IoError("pread(" + path_ + "): unexpected end of file at byte " +
                    std::to_string(offset + done) + " (wanted " + std::to_string(n) +
                    " bytes from offset " + std::to_string(offset) + ")");
    }
    done += static_cast<size_t>(r);
  }
  count(counters, &IoCounters::buffered_bytes, n);
}

void File::buffered_write(const std::byte* src, size_t n, uint64_t offset,
                          IoCounters* counters) const {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pwrite(fd_, src + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_message("pwrite", path_, errno));
    }
    done += static_cast<size_t>(r);
  }
  count(counters, &IoCounters::buffered_bytes, n);
}

bool File::try_direct_read(std::byte* dst, size_t n, uint64_t offset, IoCounters* counters) const {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(direct_fd_, dst + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EINVAL && done == 0) {  // device or fs refuses this request shape
        direct_failed_ = true;
        return false;
      }
      throw IoError(errno_message("pread(O_DIRECT)", path_, errno));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
    if (done % kIoAlignment != 0) break;  // short read at end of file
  }
  if (done < n) buffered_read(dst + done, n - done, offset + done, counters);
  count(counters, &IoCounters::direct_bytes, done);
  return true;
}

bool File::try_direct_write(const std::byte* src, size_t n, uint64_t offset,
                            IoCounters* counters) const {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pwrite(direct_fd_, src + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EINVAL && done == 0) {
        direct_failed_ = true;
        return false;
      }
      throw IoError(errno_message("pwrite(O_DIRECT)", path_, errno));
    }
    done += static_cast<size_t>(r);
    if (done % kIoAlignment != 0) break;
  }
  if (done < n) buffered_write(src + done, n - done, offset + done, counters);
  count(counters, &IoCounters::direct_bytes, done);
  return true;
}

namespace {

// Direct requests above this size are split and issued concurrently: one
// synchronous request at a time leaves most of a virtual or NVMe disk idle.
constexpr size_t kParallelChunk = 4 << 20;
constexpr size_t kMaxInFlight = 4;

// Runs io(part offset, part length) over [0, n) in up to kMaxInFlight
// concurrent, 4096-aligned parts; returns false if any part returned false.
template <class Io>
bool in_parallel(size_t n, Io io) {
  const size_t parts = std::min(kMaxInFlight, n / kParallelChunk);
  if (parts < 2) return io(size_t{0}, n);
  const size_t step = (n / parts + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
  std::vector<std::thread> threads;
  std::vector<char> ok(parts, 1);
  std::exception_ptr error;
  std::mutex mu;
  for (size_t p = 0; p < parts; ++p) {
    const size_t begin = p * step, len = std::min(n, begin + step) - std::min(n, begin);
    auto run = [&, p, begin, len] {
      try {
        ok[p] = len == 0 || io(begin, len);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
    };
    if (p + 1 == parts)
      run();
    else
      threads.emplace_back(run);
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; });
}

}  // namespace

void File::parallel_buffered_read(std::byte* dst, size_t n, uint64_t offset,
                                  IoCounters* counters) const {
  in_parallel(n, [&](size_t at, size_t len) {
    buffered_read(dst + at, len, offset + at, counters);
    return true;
  });
}

bool File::parallel_direct_read(std::byte* dst, size_t n, uint64_t offset,
                                IoCounters* counters) const {
  return in_parallel(n, [&](size_t at, size_t len) {
    return try_direct_read(dst + at, len, offset + at, counters);
  });
}

void File::calibrating_read(std::byte* dst, size_t n, uint64_t offset, const IoPolicy& io) const {
  ReadCalibration& calibration = *io.calibration;
  const bool try_direct = calibration.begin_read();
  bool direct_ok = false;
  try {
    direct_ok = try_direct && parallel_direct_read(dst, n, offset, io.counters);
    if (!try_direct)
      parallel_buffered_read(dst, n, offset, io.counters);
    else if (!direct_ok)
      buffered_read(dst, n, offset, io.counters);
  } catch (...) {
    calibration.end_read(try_direct, true, 0);
    throw;
  }
  calibration.end_read(try_direct, direct_ok || !try_direct, n);
}

void File::read_at(void* dst_v, size_t n, uint64_t offset, const IoPolicy& io) const {
  auto* dst = static_cast<std::byte*>(dst_v);
  read_own(dst, n, offset, io);
  if (overlay_) overlay_->apply(dst, n, offset);
}

void File::read_own(std::byte* dst, size_t n, uint64_t offset, const IoPolicy& io) const {
  if (!io.header) count(io.counters, &IoCounters::read_bytes, n);
  // Split into [unaligned head][aligned middle][unaligned tail]; the middle
  // may go direct when the memory it lands in is aligned too.
  uint64_t mid_start = (offset + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
  uint64_t end = offset + n;
  uint64_t mid_end = end / kIoAlignment * kIoAlignment;
  bool direct =
      io.direct && has_direct() && mid_end > mid_start && is_aligned(dst + (mid_start - offset));
  if (!direct || io.read_mode == ReadMode::kBuffered)
    return parallel_buffered_read(dst, n, offset, io.counters);
  if (mid_start > offset) buffered_read(dst, mid_start - offset, offset, io.counters);
  std::byte* mid = dst + (mid_start - offset);
  const size_t mid_n = mid_end - mid_start;
  // Smaller reads are mostly latency: they go direct until kAuto settles.
  if (io.read_mode == ReadMode::kAuto && io.calibration != nullptr &&
      mid_n >= ReadCalibration::kCalibrationBytes) {
    calibrating_read(mid, mid_n, mid_start, io);
  } else if (!parallel_direct_read(mid, mid_n, mid_start, io.counters)) {
    buffered_read(mid, mid_n, mid_start, io.counters);
  }
  if (end > mid_end) buffered_read(dst + (mid_end - offset), end - mid_end, mid_end, io.counters);
}

bool File::reads_around_direct(size_t n, uint64_t aligned_end, const IoPolicy& io) const {
  return n > 0 && io.direct && has_direct() &&
         !(io.read_mode == ReadMode::kBuffered && io.buffered_by_request) && aligned_end <= size();
}

void File::read_at_through(void* dst_v, size_t n, uint64_t offset, const IoPolicy& io,
                           AlignedBuffer& bounce) const {
  auto* dst = static_cast<std::byte*>(dst_v);
  const uint64_t start = offset / kIoAlignment * kIoAlignment;
  const uint64_t end = (offset + n + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
  const bool same_alignment =
      (reinterpret_cast<uintptr_t>(dst) - offset) % kIoAlignment == 0;  // read_at goes direct
  if (same_alignment || end - start > bounce.size() || !reads_around_direct(n, end, io) ||
      overlay_) {
    return read_at(dst, n, offset, io);
  }
  if (!io.header) count(io.counters, &IoCounters::read_bytes, n);
  if (!try_direct_read(bounce.data(), end - start, start, io.counters)) {
    return buffered_read(dst, n, offset, io.counters);
  }
  std::memcpy(dst, bounce.data() + (offset - start), n);
}

void File::read_in_place(void* dst_v, size_t n, uint64_t offset, const IoPolicy& io) const {
  auto* dst = static_cast<std::byte*>(dst_v);
  const uint64_t start = offset / kIoAlignment * kIoAlignment;
  const uint64_t end = (offset + n + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
  const bool same_alignment = (reinterpret_cast<uintptr_t>(dst) - offset) % kIoAlignment == 0;
  if (!same_alignment || !reads_around_direct(n, end, io) || overlay_)
    return read_at(dst, n, offset, io);
  if (!io.header) count(io.counters, &IoCounters::read_bytes, n);
  if (!try_direct_read(dst - (offset - start), end - start, start, io.counters)) {
    buffered_read(dst, n, offset, io.counters);
  }
}

namespace {

// Counts a write (or a resize) of a File from its start to its end, however it ends.
struct WriteInFlight {
  WriteInFlight(std::atomic<uint64_t>& started, std::atomic<uint64_t>& ended) : ended_(ended) {
    ++started;
  }
  ~WriteInFlight() { ++ended_; }
  std::atomic<uint64_t>& ended_;
};

}  // namespace

void File::write_at(const void* src_v, size_t n, uint64_t offset, const IoPolicy& io) const {
  if (!writable_) throw ReadOnlyError("cannot write to " + path_ + ": it was opened read-only");
  WriteInFlight counted(writes_started_, writes_ended_);
  if (!io.header) count(io.counters, &IoCounters::written_bytes, n);
  const auto* src = static_cast<const std::byte*>(src_v);
  uint64_t mid_start = (offset + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
  uint64_t end = offset + n;
  uint64_t mid_end = end / kIoAlignment * kIoAlignment;
  bool direct =
      io.direct && has_direct() && mid_end > mid_start && is_aligned(src + (mid_start - offset));
  if (!direct) return buffered_write(src, n, offset, io.counters);
  if (mid_start > offset) buffered_write(src, mid_start - offset, offset, io.counters);
  const std::byte* mid = src + (mid_start - offset);
  bool done = in_parallel(mid_end - mid_start, [&](size_t at, size_t len) {
    return try_direct_write(mid + at, len, mid_start + at, io.counters);
  });
  if (!done) buffered_write(mid, mid_end - mid_start, mid_start, io.counters);
  if (end > mid_end) buffered_write(src + (mid_end - offset), end - mid_end, mid_end, io.counters);
}

void File::set_overlay(std::shared_ptr<const ReadOverlay> overlay) {
  if (writable_) throw ValueError(path_ + ": a read overlay needs a read-only open");
  overlay_ = std::move(overlay);
}

uint64_t File::size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) throw IoError(errno_message("fstat", path_, errno));
  return static_cast<uint64_t>(st.st_size);
}

FileIdentity File::identity() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) throw IoError(errno_message("fstat", path_, errno));
  return FileIdentity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

uint64_t File::allocated_bytes() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) throw IoError(errno_message("fstat", path_, errno));
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

FileVersion File::version() const {
  FileVersion v;
  // Ended before started: a write in flight between the two loads shows.
  v.writes_ended = writes_ended_.load();
  v.writes_started = writes_started_.load();
  struct stat st;
  if (::fstat(fd_, &st) != 0) throw IoError(errno_message("fstat", path_, errno));
  v.size = static_cast<uint64_t>(st.st_size);
  v.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  v.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return v;
}

void File::resize(uint64_t bytes) const {
  WriteInFlight counted(writes_started_, writes_ended_);
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
    throw IoError(errno_message("ftruncate", path_, errno));
  }
}

void File::sync() const {
  if (::fdatasync(fd_) != 0) throw IoError(errno_message("fdatasync", path_, errno));
}

void File::set_permissions(unsigned mode) const {
  if (::fchmod(fd_, static_cast<mode_t>(mode)) != 0)
    throw IoError(errno_message("fchmod", path_, errno));
}

bool File::try_lock_exclusive() const {
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) return false;
    if (errno == ENOLCK || errno == EOPNOTSUPP || errno == ENOSYS) return true;
    throw IoError(errno_message("flock", path_, errno));
  }
  return true;
}

// Lines of /proc/locks read "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF".
std::string lock_holder(FileIdentity id) {
  std::ifstream locks("/proc/locks");
  char want[64];
  std::snprintf(want, sizeof want, "%02x:%02x:%llu", ::major(static_cast<dev_t>(id.device)),
                ::minor(static_cast<dev_t>(id.device)), static_cast<unsigned long long>(id.inode));
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::string number, kind, advisory, access, pid, where;
    fields >> number >> kind;
    if (kind == "->") fields >> kind;  // a waiter
    fields >> advisory >> access >> pid >> where;
    if (kind == "FLOCK" && where == want && pid != "-1") return " (held by process " + pid + ")";
  }
  return "";
}

void File::rename_over(const std::string& target, const std::string& shown_as) {
  if (::rename(path_.c_str(), target.c_str()) != 0) {
    int err = errno;
    throw IoError("rename(" + path_ + ", " + target + "): " + std::strerror(err));
  }
  path_ = shown_as;
}

ReplacementFile::ReplacementFile(const std::string& target, uint64_t size,
                                 const std::string& temp_suffix)
    : target_(target) {
  std::error_code ec;
  resolved_ = fs::canonical(target, ec).string();
  if (ec) throw IoError("cannot replace " + target + ": " + ec.message());
  struct stat st;
  if (::stat(resolved_.c_str(), &st) != 0) throw IoError(errno_message("stat", resolved_, errno));
  temp_path_ = resolved_ +
               (temp_suffix.empty()
                    ? std::string(kReplacementTag) + std::to_string(::getpid()) + "-" + random_hex()
                    : temp_suffix);
  try {
    // Created private (0600), so nobody opens it before its bits are set.
    file_ = std::make_shared<File>(temp_path_, OpenMode::kCreateExclusive);
  } catch (const IoError& e) {
    throw IoError("cannot replace " + target +
                  ": its new contents go to a file beside it, renamed "
                  "over it when complete, and that file could not be created: " +
                  e.what());
  }
  try {
    file_->set_permissions(st.st_mode & 07777);
    file_->resize(size);
    file_->try_lock_exclusive();  // a new file: nobody else holds it
  } catch (...) {
    ::unlink(temp_path_.c_str());
    throw;
  }
}

ReplacementFile::~ReplacementFile() {
  if (!committed_) ::unlink(temp_path_.c_str());
}

std::shared_ptr<File> ReplacementFile::commit() {
  file_->rename_over(resolved_, target_);
  committed_ = true;
  return file_;
}

void ReplacementFile::sync_directory() const {
  jask::sync_directory(fs::path(resolved_).parent_path().string());
}

void sync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw IoError(errno_message("open", dir, errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) throw IoError(errno_message("fsync", dir, err));
}

int remove_stale_replacements(const std::string& target) {
  std::error_code ec;
  fs::path resolved = fs::canonical(target, ec);
  if (ec) return 0;
  const std::string prefix = resolved.filename().string() + std::string(kReplacementTag);
  int removed = 0;
  for (fs::directory_iterator it(resolved.parent_path(), ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    std::optional<pid_t> pid = owner_pid(std::string_view(name).substr(prefix.size()));
    if (!pid || process_exists(*pid)) continue;
    std::error_code remove_ec;
    if (fs::remove(it->path(), remove_ec)) ++removed;
  }
  return removed;
}

}  // namespace jask
