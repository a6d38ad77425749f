#include "storage/journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
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

// Removes the .part of a dead writer: it never reached its commit point, so
// the file was never touched. A live writer's is kept (it holds the lock).
void remove_dead_part(const std::string& part, const std::string& target) {
  RecoveryFile f(part, target);
  if (f.state() == RecoveryFile::State::kRefused) {
    note_recovery(part + " is " + f.refusal() +
                  "; it is not a journal Jask wrote, so it was left alone");
    return;
  }
  if (f.state() == RecoveryFile::State::kOpen && f.lock(/*wait=*/false) && f.still_at())
    ::unlink(part.c_str());
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

// Whether the journal's header names `file` as it is: the same inode and
// size. The device numbers of one file system may change across a reboot, so
// a header whose device differs still names the file when the journal, found
// beside it, is on the file's device now.
bool names_file(const JournalHeader& h, FileIdentity file, uint64_t file_size,
                FileIdentity journal) {
  return h.file.inode == file.inode && h.file_size == file_size &&
         (h.file.device == file.device || journal.device == file.device);
}

// The header of `journal` if it is whole and intact, names `file` as it is
// now and its payload's checksum holds; else nothing.
std::optional<JournalHeader> valid_header(const File& journal, const File& file) {
  const uint64_t journal_size = journal.size();
  if (journal_size < JournalHeader::kHeaderBytes) return std::nullopt;
  std::string bytes(JournalHeader::kHeaderBytes, '\0');
  journal.read_at(bytes.data(), bytes.size(), 0, header_io_policy());
  const uint64_t size = JournalHeader::size_from(bytes);
  if (size > bytes.size() && size <= journal_size) {
    bytes.resize(static_cast<size_t>(size));
    journal.read_at(bytes.data(), bytes.size(), 0, header_io_policy());
  }
  std::optional<JournalHeader> h = JournalHeader::decode(bytes);
  if (!h || !names_file(*h, file.identity(), file.size(), journal.identity()) ||
      journal_size < h->payload_offset + h->length() ||
      payload_crc_on_disk(journal, *h) != h->payload_crc)
    return std::nullopt;
  return h;
}

// The journal `f` (opened, regular) as a File, checked to be the same file.
std::shared_ptr<File> open_journal(const RecoveryFile& f) {
  auto jf = std::make_shared<File>(f.path(), OpenMode::kReadOnly, Links::kRefuse);
  struct stat st {};
  if (::fstat(f.fd(), &st) != 0) throw IoError(errno_message("fstat", f.path(), errno));
  const FileIdentity id{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  if (jf->identity() != id) throw IoError(f.path() + " was replaced while it was read");
  return jf;
}

std::string left_alone(const std::string& journal, const std::string& target) {
  return journal + " is not an intact journal of " + target +
         " as it is now (a checksum fails, or it names another file or size); it was left alone "
         "and the file read as it is. Remove it if no update_ of the file is under way";
}

// Writes a journal's payload into the file (steps 2 and 3 again: writing the
// same bytes twice is harmless).
void replay(const File& journal, const JournalHeader& h, const std::string& path,
            const std::string& target) {
  if (::access(target.c_str(), W_OK) != 0) {
    const int err = errno;
    throw ReadOnlyError(target + ": an update_ that did not finish left its journal " + path +
                        ", whose new values must be written into the file, and this process may "
                        "not write the file (" +
                        std::strerror(err) +
                        "). A writable open replays the journal: open the file with mode=\"r+\" "
                        "as a user who may write to it");
  }
  File file(target, OpenMode::kReadWrite);
  if (!valid_header(journal, file)) return note_recovery(left_alone(path, target));
  copy_payload(journal, file, h, /*writer=*/false);
  file.sync();
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    throw IoError(errno_message("unlink", path, errno));
  sync_directory(folder_of(path));
}

// Serves reads of the runs a committed journal replaces from its payload.
class JournalOverlay : public ReadOverlay {
 public:
  JournalOverlay(std::shared_ptr<File> journal, JournalHeader h)
      : journal_(std::move(journal)), header_(std::move(h)) {}
  void apply(std::byte* dst, size_t n, uint64_t offset) const override {
    const uint64_t end = offset + n;
    uint64_t payload_at = header_.payload_offset;
    for (const ByteRun& run : header_.runs) {
      const uint64_t lo = std::max(offset, run.offset);
      const uint64_t hi = std::min(end, run.offset + run.length);
      if (lo < hi) {
        journal_->read_at(dst + (lo - offset), static_cast<size_t>(hi - lo),
                          payload_at + (lo - run.offset), io_policy());
      }
      payload_at += run.length;
    }
  }

 private:
  std::shared_ptr<File> journal_;
  JournalHeader header_;
};

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
  remove_dead_part(part_, target);
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
  remove_dead_part(journal + std::string(kPartSuffix), resolved.string());
  for (;;) {
    RecoveryFile f(journal, resolved.string());
    if (f.state() == RecoveryFile::State::kAbsent) return;
    if (f.state() == RecoveryFile::State::kRefused) {
      return note_recovery(journal + " is " + f.refusal() +
                           ", not a journal Jask wrote; it was left alone");
    }
    std::shared_ptr<File> jf = open_journal(f);
    std::optional<JournalHeader> h;
    {
      File file(resolved.string(), OpenMode::kReadOnly);
      h = valid_header(*jf, file);
    }
    if (!h) return note_recovery(left_alone(journal, resolved.string()));
    // A live writer's journal: wait for it to finish, then look again.
    f.lock(/*wait=*/true);
    if (!f.still_at()) continue;
    return replay(*jf, *h, journal, resolved.string());
  }
}

bool journal_present(const std::string& target) {
  std::error_code ec;
  const fs::path resolved = fs::canonical(target, ec);
  struct stat st {};
  return !ec && ::lstat((resolved.string() + std::string(kJournalSuffix)).c_str(), &st) == 0;
}

std::shared_ptr<const ReadOverlay> committed_overlay(const std::string& target, const File& file) {
  std::error_code ec;
  const fs::path resolved = fs::canonical(target, ec);
  if (ec) return nullptr;
  const std::string journal = resolved.string() + std::string(kJournalSuffix);
  RecoveryFile f(journal, resolved.string());
  if (f.state() == RecoveryFile::State::kAbsent) return nullptr;
  if (f.state() == RecoveryFile::State::kRefused) {
    note_recovery(journal + " is " + f.refusal() + ", not a journal Jask wrote; it was ignored");
    return nullptr;
  }
  std::shared_ptr<File> jf;
  std::optional<JournalHeader> h;
  try {
    jf = open_journal(f);
    h = valid_header(*jf, file);
  } catch (const IoError& e) {
    note_recovery(journal + " could not be read (" + e.what() + "); it was ignored");
    return nullptr;
  }
  if (!h) {
    note_recovery(left_alone(journal, resolved.string()));
    return nullptr;
  }
  // Past its commit point: the file's committed state is the payload over
  // the runs, whether or not they were written in yet.
  if (!f.held_by_writer()) {
    note_recovery(resolved.string() + ": an update_ that did not finish left its journal " +
                  journal +
                  "; this read-only open reads the new values from it without writing the file. "
                  "Open the file with mode=\"r+\" to finish the update");
  }
  return std::make_shared<JournalOverlay>(std::move(jf), std::move(*h));
}

namespace {
std::mutex g_notes_mu;
std::set<std::string>& notes_given() {
  static std::set<std::string> given;
  return given;
}
thread_local RecoveryNotes* t_notes = nullptr;
}  // namespace

RecoveryNotes::RecoveryNotes() : outer_(std::exchange(t_notes, this)) {}
RecoveryNotes::~RecoveryNotes() { t_notes = outer_; }

void note_recovery(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(g_notes_mu);
    if (!notes_given().insert(message).second) return;
  }
  if (t_notes != nullptr) {
    t_notes->notes_.push_back(message);
  } else {
    std::fprintf(stderr, "jask: %s\n", message.c_str());
  }
}

std::string file_kind(unsigned mode) {
  return S_ISLNK(mode)    ? "a symbolic link"
         : S_ISDIR(mode)  ? "a directory"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
                          : "a special file";
}

std::string untrusted_owner(unsigned uid, const std::string& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0) return "";  // no target: nothing to protect
  if (uid == st.st_uid || uid == 0 || uid == ::geteuid()) return "";
  return "owned by uid " + std::to_string(uid) + ", neither the owner of " + target + " (uid " +
         std::to_string(st.st_uid) + "), root nor this process's user (uid " +
         std::to_string(::geteuid()) + "), so it may have been planted by another user";
}

RecoveryFile::RecoveryFile(std::string path, const std::string& target) : path_(std::move(path)) {
  struct stat lst {};
  if (::lstat(path_.c_str(), &lst) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return;
    state_ = State::kRefused;
    refusal_ = std::string("unreadable (") + std::strerror(errno) + ")";
    return;
  }
  if (!S_ISREG(lst.st_mode)) {
    state_ = State::kRefused;
    refusal_ = file_kind(lst.st_mode) + ", not a regular file";
    return;
  }
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    if (errno == ENOENT) return;
    state_ = State::kRefused;
    refusal_ = errno == ELOOP ? std::string("a symbolic link, not a regular file")
                              : std::string("unreadable (") + std::strerror(errno) + ")";
    return;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != lst.st_ino ||
      st.st_dev != lst.st_dev) {
    ::close(std::exchange(fd_, -1));
    state_ = State::kRefused;
    refusal_ = "not a regular file (it changed while it was opened)";
    return;
  }
  if (!target.empty()) {
    refusal_ = untrusted_owner(st.st_uid, target);
    if (!refusal_.empty()) {
      ::close(std::exchange(fd_, -1));
      state_ = State::kRefused;
      return;
    }
  }
  state_ = State::kOpen;
}

RecoveryFile::~RecoveryFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string RecoveryFile::read(size_t limit) const {
  std::string out;
  char buf[4096];
  while (out.size() < limit) {
    const ssize_t n =
        ::pread(fd_, buf, std::min(sizeof buf, limit - out.size()), static_cast<off_t>(out.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_message("read", path_, errno));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool RecoveryFile::lock(bool wait) const {
  while (::flock(fd_, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) return false;
    if (errno == ENOLCK || errno == EOPNOTSUPP || errno == ENOSYS) return true;
    throw IoError(errno_message("flock", path_, errno));
  }
  return true;
}

bool RecoveryFile::held_by_writer() const {
  // A descriptor of its own: its lock goes when it closes, at once.
  const int fd = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = false;
  while (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    held = errno == EWOULDBLOCK;
    break;
  }
  ::close(fd);
  return held;
}

bool RecoveryFile::still_at() const {
  struct stat open_st {};
  struct stat path_st {};
  return fd_ >= 0 && ::fstat(fd_, &open_st) == 0 && ::lstat(path_.c_str(), &path_st) == 0 &&
         open_st.st_dev == path_st.st_dev && open_st.st_ino == path_st.st_ino;
}

}  // namespace jask
