#include "storage/journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "base/errors.hpp"
#include "base/memory_budget.hpp"
#include "io/runs.hpp"
#include "storage/codecs.hpp"
#include "storage/io_config.hpp"

namespace fs = std::filesystem;

namespace jask {
namespace {

constexpr std::string_view kJournalSuffix = ".jask-journal";
constexpr std::string_view kPartSuffix = ".part";
// One run: version 1 (as every journal was before rows were written in place).
constexpr std::string_view kMagic = "jask-journal 1\n";  // 15 bytes, padded to 16 with a 0
// Several runs: version 2, the run table after the fixed fields.
constexpr std::string_view kMagicRuns = "jask-journal 2\n";
constexpr size_t kMagicBytes = 16;
constexpr size_t kFieldBytes = kMagicBytes + 6 * 8 + 4;  // magic, six u64, the payload's CRC
// Version 2: magic, five u64 (device, inode, file size, run count, payload
// offset), the payload's CRC, then 16 bytes per run; the header's CRC last.
constexpr size_t kRunsFixedBytes = kMagicBytes + 5 * 8 + 4;
constexpr size_t kRunBytes = 16;
// A run table beyond this is no header (a corrupt count): 64 MiB of it.
constexpr uint64_t kMaxRuns = uint64_t{1} << 22;

uint64_t runs_header_bytes(uint64_t n_runs) {
  const uint64_t fields = kRunsFixedBytes + kRunBytes * n_runs + 4;
  return (fields + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
}
// The largest block of the in-place copy (several direct requests at once,
// File::write_at); the memory budget bounds it below that.
constexpr uint64_t kMaxCopyBlock = uint64_t{16} << 20;

std::atomic<uint64_t> g_threshold{uint64_t{1} << 20};

// CRC32C's reflected polynomial (the checksum itself: storage/codecs.cpp).
constexpr uint32_t kPoly = 0x82F63B78u;

// a(x) * b(x) mod P(x), bits reflected; `a` non-zero (zlib's multmodp).
uint32_t multmodp(uint32_t a, uint32_t b) {
  uint32_t m = uint32_t{1} << 31, p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = b & 1 ? (b >> 1) ^ kPoly : b >> 1;
  }
  return p;
}

// x^(2^k) mod P for k < 32.
std::array<uint32_t, 32> make_powers() {
  std::array<uint32_t, 32> t{};
  uint32_t p = uint32_t{1} << 30;  // x^1
  t[0] = p;
  for (size_t k = 1; k < 32; ++k) t[k] = p = multmodp(p, p);
  return t;
}

// x^(n * 2^k) mod P.
uint32_t x2nmodp(uint64_t n, unsigned k) {
  static const std::array<uint32_t, 32> powers = make_powers();
  uint32_t p = uint32_t{1} << 31;  // x^0
  for (; n != 0; n >>= 1, ++k)
    if (n & 1) p = multmodp(powers[k & 31], p);
  return p;
}

void put_u64(std::string& out, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u32(std::string& out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t get_le(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}
uint64_t get_u64(std::string_view in, size_t at) { return get_le(in, at, 8); }
uint32_t get_u32(std::string_view in, size_t at) {
  return static_cast<uint32_t>(get_le(in, at, 4));
}

// An open descriptor, closed on destruction.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// flock(LOCK_EX) on `fd`, waiting for the holder when `wait`. False if
// another open holds it (not waiting). File systems without flock() report
// true: nothing says a writer lives.
bool lock(int fd, bool wait, const std::string& path) {
  while (::flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) return false;
    if (errno == ENOLCK || errno == EOPNOTSUPP || errno == ENOSYS) return true;
    throw IoError(errno_message("flock", path, errno));
  }
  return true;
}

// `path` still names the file `fd` has open (it was not unlinked or
// replaced since it was opened).
bool still_at(const std::string& path, int fd) {
  struct stat open_st {};
  struct stat path_st {};
  return ::fstat(fd, &open_st) == 0 && ::stat(path.c_str(), &path_st) == 0 &&
         open_st.st_dev == path_st.st_dev && open_st.st_ino == path_st.st_ino;
}

// Removes the .part of a dead writer: it never reached its commit point, so
// the file was never touched. A live writer's is kept (it holds the lock).
void remove_dead_part(const std::string& part) {
  Fd fd(::open(part.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return;
  if (lock(fd.fd, /*wait=*/false, part) && still_at(part, fd.fd)) ::unlink(part.c_str());
}

std::string folder_of(const std::string& path) { return fs::path(path).parent_path().string(); }

uint64_t copy_block_bytes() {
  const uint64_t budget = static_cast<uint64_t>(std::max<int64_t>(memory_budget(), 0));
  const uint64_t block = std::min(budget, kMaxCopyBlock) / kIoAlignment * kIoAlignment;
  return std::max<uint64_t>(block, kIoAlignment);
}

// Writes the journal's payload over the extent it names, in blocks on the
// file's 4096-byte grid: each block lands in the buffer at its offset mod
// 4096, which is also its offset in the journal mod 4096, so the aligned
// middles of both the read and the write go direct. `writer`: the update's
// own copy (the test crash point applies).
void copy_payload(const File& journal, const File& target, const JournalHeader& h, bool writer) {
  const IoPolicy io = io_policy();
  const uint64_t block = copy_block_bytes();
  AlignedBuffer buf(static_cast<size_t>(block));
  uint64_t payload_at = h.payload_offset;  // of the run's first byte
  for (const ByteRun& run : h.runs) {
    const uint64_t end = run.offset + run.length;
    for (uint64_t at = run.offset; at < end;) {
      const uint64_t next = std::min(end, at / kIoAlignment * kIoAlignment + block);
      std::byte* data = buf.data() + at % kIoAlignment;
      const size_t n = static_cast<size_t>(next - at);
      journal.read_at(data, n, payload_at + (at - run.offset), io);
      target.write_at(data, n, at, io);
      if (writer && at == run.offset && next < end) crash_if("in_place_half_written");
      at = next;
    }
    payload_at += run.length;
  }
}

// The checksum of the journal's payload as it is on disk.
uint32_t payload_crc_on_disk(const File& journal, const JournalHeader& h) {
  const IoPolicy io = io_policy();
  const uint64_t block = copy_block_bytes();
  AlignedBuffer buf(static_cast<size_t>(block));
  uint32_t crc = 0;
  const uint64_t length = h.length();
  for (uint64_t done = 0; done < length;) {
    const size_t n = static_cast<size_t>(std::min(block, length - done));
    journal.read_at(buf.data(), n, h.payload_offset + done, io);
    crc = crc32c(crc, buf.data(), n);
    done += n;
  }
  return crc;
}

// Whether the journal's header names the file at `target` as it is: the
// same inode and size. The device numbers of one file system may change
// across a reboot, so a header whose device differs still names the file
// when the journal, found beside it, is on the file's device now.
bool names_file(const JournalHeader& h, const struct stat& file, const struct stat& journal) {
  return h.file.inode == static_cast<uint64_t>(file.st_ino) &&
         h.file_size == static_cast<uint64_t>(file.st_size) &&
         (h.file.device == static_cast<uint64_t>(file.st_dev) || journal.st_dev == file.st_dev);
}

// A locked journal no live writer holds: replayed if intact and naming the
// file, else removed (the file was never touched).
void replay_or_discard(int locked, const std::string& journal, const std::string& target) {
  File jf(journal, OpenMode::kReadOnly);
  struct stat journal_st {};
  struct stat target_st {};
  if (::fstat(locked, &journal_st) != 0) throw IoError(errno_message("fstat", journal, errno));
  if (::stat(target.c_str(), &target_st) != 0) throw IoError(errno_message("stat", target, errno));
  std::optional<JournalHeader> h;
  if (jf.size() >= JournalHeader::kHeaderBytes) {
    std::string bytes(JournalHeader::kHeaderBytes, '\0');
    jf.read_at(bytes.data(), bytes.size(), 0, io_policy());
    const uint64_t size = JournalHeader::size_from(bytes);
    if (size > bytes.size() && size <= jf.size()) {
      bytes.resize(static_cast<size_t>(size));
      jf.read_at(bytes.data(), bytes.size(), 0, io_policy());
    }
    h = JournalHeader::decode(bytes);
  }
  const bool valid = h && names_file(*h, target_st, journal_st) &&
                     jf.size() >= h->payload_offset + h->length() &&
                     payload_crc_on_disk(jf, *h) == h->payload_crc;
  if (!valid) {
    ::unlink(journal.c_str());
    return;
  }
  if (::access(target.c_str(), W_OK) != 0) {
    const int err = errno;
    throw ReadOnlyError(target + ": an update_ that did not finish left its journal " + journal +
                        ", whose new values must be written into the file before it is read, "
                        "and this process may not write the file (" +
                        std::strerror(err) +
                        "). A writable open replays the journal: open the file with mode=\"r+\" "
                        "as a user who may write to it");
  }
  File file(target, OpenMode::kReadWrite);
  copy_payload(jf, file, *h, /*writer=*/false);
  file.sync();
  if (::unlink(journal.c_str()) != 0 && errno != ENOENT)
    throw IoError(errno_message("unlink", journal, errno));
  sync_directory(folder_of(journal));
}

}  // namespace

uint64_t in_place_update_threshold() { return g_threshold.load(std::memory_order_relaxed); }
void set_in_place_update_threshold(uint64_t bytes) { g_threshold = bytes; }

uint32_t crc32c(uint32_t crc, const void* data, size_t n) { return jask::crc32c(data, n, crc); }

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  return multmodp(x2nmodp(length_b, 3), crc_a) ^ crc_b;
}

uint64_t JournalHeader::length() const {
  uint64_t n = 0;
  for (const ByteRun& r : runs) n += r.length;
  return n;
}

uint64_t JournalHeader::payload_offset_for(const std::vector<ByteRun>& runs) {
  return runs.size() == 1 ? payload_offset_for(runs[0].offset) : runs_header_bytes(runs.size());
}

std::string JournalHeader::encode() const {
  if (runs.size() == 1) {
    std::string out(kHeaderBytes, '\0');
    std::memcpy(out.data(), kMagic.data(), kMagic.size());
    size_t at = kMagicBytes;
    for (uint64_t v :
         {file.device, file.inode, file_size, runs[0].offset, runs[0].length, payload_offset}) {
      put_u64(out, at, v);
      at += 8;
    }
    put_u32(out, at, payload_crc);
    put_u32(out, kFieldBytes, crc32c(0, out.data(), kFieldBytes));
    return out;
  }
  std::string out(static_cast<size_t>(runs_header_bytes(runs.size())), '\0');
  std::memcpy(out.data(), kMagicRuns.data(), kMagicRuns.size());
  size_t at = kMagicBytes;
  for (uint64_t v : {file.device, file.inode, file_size, uint64_t{runs.size()}, payload_offset}) {
    put_u64(out, at, v);
    at += 8;
  }
  put_u32(out, at, payload_crc);
  at += 4;
  for (const ByteRun& r : runs) {
    put_u64(out, at, r.offset);
    put_u64(out, at + 8, r.length);
    at += kRunBytes;
  }
  put_u32(out, at, crc32c(0, out.data(), at));
  return out;
}

uint64_t JournalHeader::size_from(std::string_view first) {
  if (first.size() < kHeaderBytes || first[kMagicBytes - 1] != '\0') return 0;
  if (first.substr(0, kMagic.size()) == kMagic) return kHeaderBytes;
  if (first.substr(0, kMagicRuns.size()) != kMagicRuns) return 0;
  const uint64_t n_runs = get_u64(first, kMagicBytes + 3 * 8);
  return n_runs < 2 || n_runs > kMaxRuns ? 0 : runs_header_bytes(n_runs);
}

std::optional<JournalHeader> JournalHeader::decode(std::string_view bytes) {
  const uint64_t size = size_from(bytes);
  if (size == 0 || bytes.size() < size) return std::nullopt;
  JournalHeader h;
  if (size == kHeaderBytes && bytes.substr(0, kMagic.size()) == kMagic) {
    if (get_u32(bytes, kFieldBytes) != crc32c(0, bytes.data(), kFieldBytes)) return std::nullopt;
    ByteRun run;
    size_t at = kMagicBytes;
    for (uint64_t* v : {&h.file.device, &h.file.inode, &h.file_size, &run.offset, &run.length,
                        &h.payload_offset}) {
      *v = get_u64(bytes, at);
      at += 8;
    }
    h.payload_crc = get_u32(bytes, at);
    h.runs = {run};
  } else {
    const uint64_t n_runs = get_u64(bytes, kMagicBytes + 3 * 8);
    const size_t crc_at = kRunsFixedBytes + kRunBytes * static_cast<size_t>(n_runs);
    if (get_u32(bytes, crc_at) != crc32c(0, bytes.data(), crc_at)) return std::nullopt;
    h.file.device = get_u64(bytes, kMagicBytes);
    h.file.inode = get_u64(bytes, kMagicBytes + 8);
    h.file_size = get_u64(bytes, kMagicBytes + 16);
    h.payload_offset = get_u64(bytes, kMagicBytes + 32);
    h.payload_crc = get_u32(bytes, kMagicBytes + 40);
    h.runs.resize(static_cast<size_t>(n_runs));
    for (size_t k = 0; k < h.runs.size(); ++k) {
      h.runs[k].offset = get_u64(bytes, kRunsFixedBytes + kRunBytes * k);
      h.runs[k].length = get_u64(bytes, kRunsFixedBytes + kRunBytes * k + 8);
    }
  }
  // Every run inside the file, ascending and disjoint: a replay writes nothing else.
  uint64_t end = 0;
  for (const ByteRun& r : h.runs) {
    if (r.length == 0 || r.offset < end || r.offset > h.file_size ||
        r.length > h.file_size - r.offset)
      return std::nullopt;
    end = r.offset + r.length;
  }
  if (h.payload_offset != payload_offset_for(h.runs)) return std::nullopt;
  return h;
}

void write_runs(const File& file, const std::byte* data, const std::vector<ByteRun>& runs,
                const IoPolicy& io) {
  std::vector<WriteRun> requests;
  requests.reserve(runs.size());
  uint64_t at = 0;
  for (const ByteRun& r : runs) {
    requests.push_back(WriteRun{r.offset, static_cast<size_t>(r.length), data + at});
    at += r.length;
  }
  if (requests.empty()) return;
  // The first run alone, then the rest with many in flight: a crash test stops between them.
  file.write_at(requests[0].src, requests[0].bytes, requests[0].offset, io);
  if (requests.size() == 1) return;
  crash_if("rows_half_written");
  jask::write_runs(file, std::span<const WriteRun>(requests).subspan(1), io);
}

std::string journal_path(const std::string& target) {
  std::error_code ec;
  fs::path resolved = fs::canonical(target, ec);
  if (ec) throw IoError("cannot update " + target + " in place: " + ec.message());
  return resolved.string() + std::string(kJournalSuffix);
}

JournalWriter::JournalWriter(const std::string& target, const File& file, uint64_t offset,
                             uint64_t length)
    : JournalWriter(target, file, std::vector<ByteRun>{ByteRun{offset, length}}) {}

JournalWriter::JournalWriter(const std::string& target, const File& file, std::vector<ByteRun> runs)
    : path_(journal_path(target)), part_(path_ + std::string(kPartSuffix)) {
  folder_ = folder_of(path_);
  header_.file = file.identity();
  header_.file_size = file.size();
  header_.runs = std::move(runs);
  header_.payload_offset = JournalHeader::payload_offset_for(header_.runs);
  const uint64_t length = header_.length();
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0) throw IoError(errno_message("stat", target, errno));
  remove_dead_part(part_);
  // A recovery in another process may catch the new .part between its
  // creation and its lock, and remove it: then it is made again.
  for (int attempt = 0;; ++attempt) {
    try {
      journal_ = std::make_shared<File>(part_, OpenMode::kCreateExclusive);
    } catch (const IoError& e) {
      throw IoError("cannot update " + target + " in place: its journal " + part_ +
                    " could not be created: " + e.what());
    }
    try {
      journal_->try_lock_exclusive();  // a new file: nobody else holds it
    } catch (...) {
      ::unlink(part_.c_str());
      throw;
    }
    struct stat part_st {};
    if (::stat(part_.c_str(), &part_st) == 0 &&
        static_cast<uint64_t>(part_st.st_ino) == journal_->identity().inode)
      break;
    if (attempt == 3) throw IoError("cannot update " + target + ": its journal keeps vanishing");
  }
  try {
    // Whoever may read the file may read the journal (and wait on its lock).
    journal_->set_permissions(st.st_mode & 0666);
    journal_->resize(header_.payload_offset + length);
  } catch (...) {
    ::unlink(part_.c_str());
    throw;
  }
}

// Before the commit point the file is untouched, and the update fails as a
// whole: its journal goes, under whichever name it has.
JournalWriter::~JournalWriter() {
  if (!committed_) ::unlink((renamed_ ? path_ : part_).c_str());
}

void JournalWriter::wrote(const void* data, size_t n, uint64_t at) {
  const uint32_t crc = crc32c(0, data, n);
  std::lock_guard<std::mutex> lock(mu_);
  pieces_.push_back(Piece{at, n, crc});
}

// The payload's checksum from the pieces' own, when they tile the payload
// exactly (the usual case: every byte written once); else read back.
uint32_t JournalWriter::payload_crc() const {
  std::vector<Piece> pieces;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pieces = pieces_;
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.at < b.at; });
  uint64_t covered = 0;
  uint32_t crc = 0;
  for (const Piece& p : pieces) {
    if (p.at != header_.payload_offset + covered) return payload_crc_on_disk(*journal_, header_);
    crc = crc32c_combine(crc, p.crc, p.n);
    covered += p.n;
  }
  if (covered != header_.length()) return payload_crc_on_disk(*journal_, header_);
  return crc;
}

void JournalWriter::commit() {
  header_.payload_crc = payload_crc();
  const std::string header = header_.encode();
  AlignedBuffer buf(header.size());
  std::memcpy(buf.data(), header.data(), header.size());
  journal_->write_at(buf.data(), header.size(), 0, io_policy());
  crash_if("in_place_journal_written");
  journal_->sync();
  journal_->rename_over(path_, path_);
  renamed_ = true;
  sync_directory(folder_);
  committed_ = true;
  crash_if("in_place_journal_flushed");
}

void JournalWriter::write_in_place(const File& target) const {
  copy_payload(*journal_, target, header_, /*writer=*/true);
}

void JournalWriter::write_in_place(const File& target, const std::byte* payload) const {
  write_runs(target, payload, header_.runs, io_policy());
}

void JournalWriter::finish(const File& target) {
  target.sync();
  crash_if("in_place_written");
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT)
    throw IoError(errno_message("unlink", path_, errno));
  sync_directory(folder_);
}

void recover_journal(const std::string& target) {
  std::error_code ec;
  const fs::path resolved = fs::canonical(target, ec);
  if (ec) return;
  const std::string journal = resolved.string() + std::string(kJournalSuffix);
  remove_dead_part(journal + std::string(kPartSuffix));
  for (;;) {
    Fd fd(::open(journal.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.fd < 0) {
      const int err = errno;
      if (err == ENOENT) return;
      const std::string message = errno_message("open", journal, err) +
                                  " (the journal of an update_ of " + resolved.string() +
                                  " that did not finish; a writable open replays it)";
      if (err == EACCES || err == EPERM) throw ReadOnlyError(message);
      throw IoError(message);
    }
    // A live writer's journal: wait for it to finish, then look again.
    lock(fd.fd, /*wait=*/true, journal);
    if (!still_at(journal, fd.fd)) continue;
    return replay_or_discard(fd.fd, journal, resolved.string());
  }
}

}  // namespace jask
