#include "storage/transaction.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string_view>
#include <utility>

#include "base/errors.hpp"
#include "storage/journal.hpp"

namespace fs = std::filesystem;

namespace jask {
namespace {

constexpr std::string_view kTxnTag = ".jask-txn-";
constexpr std::string_view kPointerSuffix = ".ptr";
constexpr std::string_view kJournalSuffix = ".journal";
constexpr std::string_view kPartSuffix = ".part";
// Version 2 files end with a CRC32C of what precedes it and name their
// writer's host (and a record its pid). Version 1 (an older Jask: no
// checksum, no host) is never acted on.
constexpr std::string_view kRecordMagic = "jask-txn 2\n";
constexpr std::string_view kPointerMagic = "jask-txn-pointer 2\n";
constexpr std::string_view kRecordMagicV1 = "jask-txn 1\n";
// A record or pointer longer than this is not one (a pytree of 10,000 leaves
// at 400 bytes a pair takes 4 MB).
constexpr size_t kMaxRecordBytes = size_t{16} << 20;

std::string new_txn_id() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d-%08x%08x", static_cast<int>(::getpid()),
                static_cast<unsigned>(rd()), static_cast<unsigned>(rd()));
  return buf;
}

// <pid>-<16 hex digits>, as new_txn_id makes them.
bool valid_id(std::string_view id) {
  const size_t dash = id.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash > 10 || id.size() != dash + 17)
    return false;
  for (size_t i = 0; i < dash; ++i)
    if (id[i] < '0' || id[i] > '9') return false;
  for (char c : id.substr(dash + 1))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return std::atoll(std::string(id.substr(0, dash)).c_str()) > 0;
}

bool process_exists(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH); }

const std::string& this_host() {
  static const std::string host = [] {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) return std::string("?");
    return std::string(buf);
  }();
  return host;
}

bool lexists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// An open descriptor, closed on destruction.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  Fd(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void write_all(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_message("write", path, errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// A new private file holding `contents`, flushed to disk; flock()ed first
// when `lock` (a pointer file: its lock says its writer lives).
Fd write_new_file(const std::string& path, std::string_view contents, bool lock = false) {
  Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.fd < 0) throw IoError(errno_message("open", path, errno));
  if (lock) ::flock(fd.fd, LOCK_EX);
  write_all(fd.fd, contents, path);
  if (::fdatasync(fd.fd) != 0) throw IoError(errno_message("fdatasync", path, errno));
  return fd;
}

std::string folder_of(const std::string& path) { return fs::path(path).parent_path().string(); }

// An absolute path with nothing to resolve lexically ("..", ".", "//").
bool plain_absolute(const std::string& path) {
  const fs::path p(path);
  return p.is_absolute() && p.has_filename() && p.lexically_normal().string() == path &&
         path.find('\0') == std::string::npos;
}

// --- The files' contents: fields, then "crc <8 hex>\n" over them ----------

void put_sized(std::string& out, std::string_view s) {
  out += std::to_string(s.size()) + ":";
  out += s;
}

std::string sealed(std::string body) {
  char crc[16];
  std::snprintf(crc, sizeof crc, "crc %08x\n", crc32c(0, body.data(), body.size()));
  return body + crc;
}

// Reads the fields of a sealed file; ok() false once anything is off.
class Fields {
 public:
  // The body of `text` if its checksum holds.
  static std::optional<Fields> unseal(std::string_view text, std::string_view magic) {
    constexpr size_t kSeal = 13;  // "crc xxxxxxxx\n"
    if (text.size() < magic.size() + kSeal || text.substr(0, magic.size()) != magic)
      return std::nullopt;
    const std::string_view body = text.substr(0, text.size() - kSeal);
    char want[16];
    std::snprintf(want, sizeof want, "crc %08x\n", crc32c(0, body.data(), body.size()));
    if (text.substr(body.size()) != want) return std::nullopt;
    return Fields(body.substr(magic.size()));
  }
  bool literal(std::string_view s) {
    if (text_.substr(0, s.size()) != s) return ok_ = false;
    text_.remove_prefix(s.size());
    return true;
  }
  std::string sized() {
    const size_t colon = text_.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon > 9) return fail();
    size_t n = 0;
    for (char c : text_.substr(0, colon)) {
      if (c < '0' || c > '9') return fail();
      n = n * 10 + static_cast<size_t>(c - '0');
    }
    if (text_.size() < colon + 1 + n) return fail();
    std::string out(text_.substr(colon + 1, n));
    text_.remove_prefix(colon + 1 + n);
    return out;
  }
  std::string line() {
    const size_t end = text_.find('\n');
    if (end == std::string_view::npos) return fail();
    std::string out(text_.substr(0, end));
    text_.remove_prefix(end + 1);
    return out;
  }
  bool empty() const { return text_.empty(); }
  bool ok() const { return ok_; }

 private:
  explicit Fields(std::string_view text) : text_(text) {}
  std::string fail() {
    ok_ = false;
    text_ = {};
    return {};
  }
  std::string_view text_;
  bool ok_ = true;
};

// What a pointer file says: the writer's host and its commit record's path.
struct Pointer {
  std::string host, record;
};

std::string encode_pointer(const Pointer& p) {
  std::string out(kPointerMagic);
  out += "host ";
  put_sized(out, p.host);
  out += "\nrecord ";
  put_sized(out, p.record);
  out += "\n";
  return sealed(std::move(out));
}

std::optional<Pointer> decode_pointer(std::string_view text) {
  std::optional<Fields> f = Fields::unseal(text, kPointerMagic);
  if (!f) return std::nullopt;
  Pointer p;
  f->literal("host ");
  p.host = f->sized();
  f->literal("\nrecord ");
  p.record = f->sized();
  f->literal("\n");
  if (!f->ok() || !f->empty()) return std::nullopt;
  return p;
}

using Record = TransactionRecord;

std::string encode_record(const Record& r) {
  std::string out(kRecordMagic);
  out += "id " + r.id + "\npid " + std::to_string(r.pid) + "\nhost ";
  put_sized(out, r.host);
  out += "\n";
  for (const auto& [temp, target] : r.pairs) {
    put_sized(out, temp);
    put_sized(out, target);
    out += "\n";
  }
  return sealed(std::move(out));
}

std::optional<Record> decode_record(std::string_view text) {
  std::optional<Fields> f = Fields::unseal(text, kRecordMagic);
  if (!f) return std::nullopt;
  Record r;
  f->literal("id ");
  r.id = f->line();
  f->literal("pid ");
  const std::string pid = f->line();
  f->literal("host ");
  r.host = f->sized();
  f->literal("\n");
  if (!f->ok() || pid.empty() || pid.size() > 10 ||
      pid.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  r.pid = static_cast<int>(std::atoll(pid.c_str()));
  while (f->ok() && !f->empty()) {
    std::string temp = f->sized();
    std::string target = f->sized();
    f->literal("\n");
    r.pairs.emplace_back(std::move(temp), std::move(target));
  }
  if (!f->ok()) return std::nullopt;
  return r;
}

// --- What recovery may act on ---------------------------------------------

// A record path of Jask's form for transaction `id`: <X>.jask-txn-<id>.journal.
bool record_path_of(const std::string& record, const std::string& id) {
  const std::string tail = std::string(kTxnTag) + id + std::string(kJournalSuffix);
  return plain_absolute(record) && record.size() > tail.size() &&
         record.compare(record.size() - tail.size(), tail.size(), tail) == 0 &&
         fs::path(record).filename().string().size() > tail.size();
}

// Why `r`, read at `path` for transaction `id`, is not a record Jask wrote
// for a transaction involving `target`; empty if it is one.
std::string record_fault(const Record& r, const std::string& path, const std::string& id,
                         const std::string& target) {
  if (r.id != id) return "it is the record of transaction " + r.id + ", not " + id;
  if (r.pairs.empty()) return "it lists no files";
  if (path != r.pairs[0].second + std::string(kTxnTag) + id + std::string(kJournalSuffix))
    return "its name is not the one Jask gives the record of its first file";
  std::set<std::string> targets;
  bool lists_target = false;
  for (const auto& [temp, t] : r.pairs) {
    if (!plain_absolute(t) || temp != t + std::string(kTxnTag) + id)
      return "it pairs " + temp + " with " + t + ", which is not a new file beside its target";
    if (!targets.insert(t).second) return "it lists " + t + " twice";
    lists_target = lists_target || t == target;
  }
  if (!lists_target) return "it does not list " + target;
  return "";
}

// One pointer of a target, as read.
struct PointerState {
  enum Kind { kUnwritten, kUncommitted, kCommitted, kUntrusted } kind = kUntrusted;
  Pointer pointer;
  Record record;      // kCommitted
  std::string fault;  // kUntrusted: what is wrong, for the message
};

PointerState inspect(const RecoveryFile& file, const std::string& id, const std::string& target) {
  PointerState s;
  const std::string text = file.read(kMaxRecordBytes);
  if (text.empty()) {
    s.kind = PointerState::kUnwritten;  // created, not yet written (or its writer died then)
    return s;
  }
  std::optional<Pointer> p = decode_pointer(text);
  if (!p) {
    s.fault =
        "it is not a pointer this version of Jask writes (no intact checksum; an older Jask "
        "wrote the bare path of its record)";
    return s;
  }
  s.pointer = *p;
  if (!record_path_of(p->record, id)) {
    s.fault = "the commit record it names, " + p->record + ", is not named as Jask names one";
    return s;
  }
  RecoveryFile record(p->record, target);
  if (record.state() == RecoveryFile::State::kAbsent) {
    s.kind = PointerState::kUncommitted;
    return s;
  }
  if (record.state() == RecoveryFile::State::kRefused) {
    s.fault = "the commit record it names, " + p->record + ", is " + record.refusal();
    return s;
  }
  const std::string rtext = record.read(kMaxRecordBytes);
  std::optional<Record> r = decode_record(rtext);
  if (!r) {
    s.fault = rtext.starts_with(kRecordMagicV1)
                  ? "its commit record " + p->record +
                        " is of an older Jask (version 1, without a checksum), which this version "
                        "does not act on: finish the update with that version, or remove the "
                        "record and its pointers by hand"
                  : "its commit record " + p->record + " is not intact (its checksum fails)";
    return s;
  }
  s.fault = record_fault(*r, p->record, id, target);
  if (!s.fault.empty()) {
    s.fault = "its commit record " + p->record + " is not Jask's: " + s.fault;
    return s;
  }
  s.record = std::move(*r);
  s.kind = PointerState::kCommitted;
  return s;
}

std::string left_alone(const std::string& file, const std::string& why) {
  return file + " was left alone: " + why +
         ". Jask acts only on the transaction files it wrote; remove it if no jask.update_tree_ "
         "is under way";
}

// A file of Jask's name in the target's folder removed: regular files only.
// False (and reported) for anything else.
bool remove_own(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return true;
  if (!S_ISREG(st.st_mode)) {
    note_recovery(left_alone(path, "it is " + file_kind(st.st_mode) + ", not a regular file"));
    return false;
  }
  return ::unlink(path.c_str()) == 0 || errno == ENOENT;
}

// The transaction files of `target` in its folder: id -> (pointer?, record?).
struct OwnFiles {
  std::map<std::string, std::pair<bool, bool>> by_id;
};

OwnFiles own_files(const fs::path& resolved) {
  OwnFiles out;
  std::error_code ec;
  const std::string prefix = resolved.filename().string() + std::string(kTxnTag);
  for (fs::directory_iterator it(resolved.parent_path(), ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string_view rest = std::string_view(name).substr(prefix.size());
    for (const bool pointer : {true, false}) {
      const std::string_view suffix = pointer ? kPointerSuffix : kJournalSuffix;
      if (rest.size() <= suffix.size() || !rest.ends_with(suffix)) continue;
      const std::string id(rest.substr(0, rest.size() - suffix.size()));
      if (!valid_id(id)) continue;
      (pointer ? out.by_id[id].first : out.by_id[id].second) = true;
    }
  }
  return out;
}

std::string pointer_path(const std::string& target, const std::string& id) {
  return target + std::string(kTxnTag) + id + std::string(kPointerSuffix);
}

// Redoes step 3 of a committed transaction (see transaction.hpp) for its
// files in `folder`; removes the record once no file of it is left to rename
// (it may lie in another folder, whose recovery removes it then).
void roll_forward(const Record& r, const std::string& record, const std::string& folder) {
  bool renamed = false;
  for (const auto& [temp, target] : r.pairs) {
    if (folder_of(target) != folder) continue;
    struct stat st {};
    if (::lstat(temp.c_str(), &st) != 0) continue;  // renamed in already
    if (!S_ISREG(st.st_mode)) {
      return note_recovery(left_alone(
          temp, "it is " + file_kind(st.st_mode) + ", not the regular file update_tree_ writes"));
    }
    if (const std::string why = untrusted_owner(st.st_uid, target); !why.empty())
      return note_recovery(left_alone(temp, why));
    if (::lstat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      return note_recovery(left_alone(
          temp, "its target " + target + " is " + file_kind(st.st_mode) + ", not a regular file"));
    }
    if (::rename(temp.c_str(), target.c_str()) != 0 && errno != ENOENT) {
      const int err = errno;
      throw IoError("cannot finish the update of " + target + ": jask.update_tree_ committed it (" +
                    record + ") but its process died before renaming " + temp + " over it (" +
                    std::strerror(err) +
                    "). Open one of its arrays with mode=\"r+\" as a user who "
                    "may write to " +
                    folder + " to finish it");
    }
    renamed = true;
  }
  if (renamed) sync_directory(folder);
  for (const auto& [temp, target] : r.pairs)
    if (folder_of(target) == folder) remove_own(temp + std::string(kPointerSuffix));
  const bool pending = std::any_of(r.pairs.begin(), r.pairs.end(), [](const auto& pair) {
    return lexists(pair.first + std::string(kPointerSuffix));
  });
  if (!pending && folder_of(record) == folder) remove_own(record);
}

// Undoes an uncommitted transaction's files in the target's folder: its new
// file, the record's .part when it lies there, then the pointer.
void roll_back(const std::string& pointer, const PointerState& s, const std::string& target,
               const std::string& id) {
  if (!remove_own(target + std::string(kTxnTag) + id)) return;
  if (folder_of(s.pointer.record) == folder_of(target) &&
      !remove_own(s.pointer.record + std::string(kPartSuffix)))
    return;
  remove_own(pointer);
}

// One pointer file of a transaction that may have no live writer.
void recover_pointer(const std::string& pointer, const std::string& id, const std::string& target) {
  RecoveryFile file(pointer, target);
  if (file.state() == RecoveryFile::State::kAbsent) return;
  if (file.state() == RecoveryFile::State::kRefused)
    return note_recovery(left_alone(pointer, "it is " + file.refusal()));
  if (!file.lock(/*wait=*/false)) {
    // A live writer. Committed: its renames are under way, and a reader must
    // not see some done and some not, so wait for them (they are brief).
    if (inspect(file, id, target).kind != PointerState::kCommitted) return;
    file.lock(/*wait=*/true);
  }
  if (!file.still_at()) return;  // its writer finished
  const PointerState s = inspect(file, id, target);
  switch (s.kind) {
    case PointerState::kUnwritten:
      // Created, not yet written and not locked: its writer died then, or
      // waits for this lock, and on getting it finds its pointer gone and
      // gives up (replace_all). Either way the step was not committed.
      remove_own(pointer);
      return;
    case PointerState::kUntrusted: return note_recovery(left_alone(pointer, s.fault));
    default: break;
  }
  if (s.pointer.host != this_host()) {
    return note_recovery(left_alone(pointer, "its writer runs on host " + s.pointer.host +
                                                 ", not this one (" + this_host() +
                                                 "), so it is not presumed dead"));
  }
  if (s.kind == PointerState::kCommitted)
    return roll_forward(s.record, s.pointer.record, folder_of(target));
  roll_back(pointer, s, target, id);  // never committed: the target kept its old values
}

// A record named after `target` whose pointer beside it is gone: removed
// once no file of its transaction is left to rename and its writer is dead.
void remove_finished_record(const std::string& record, const std::string& id,
                            const std::string& target) {
  RecoveryFile file(record, target);
  if (file.state() == RecoveryFile::State::kAbsent) return;
  if (file.state() == RecoveryFile::State::kRefused)
    return note_recovery(left_alone(record, "it is " + file.refusal()));
  const std::optional<Record> r = decode_record(file.read(kMaxRecordBytes));
  const std::string fault =
      r ? record_fault(*r, record, id, target) : "it is not an intact commit record";
  if (!fault.empty()) return note_recovery(left_alone(record, fault));
  if (r->host != this_host() || process_exists(static_cast<pid_t>(r->pid))) return;
  for (const auto& [temp, t] : r->pairs)
    if (lexists(temp + std::string(kPointerSuffix))) return;
  remove_own(record);
}

// Deletes the pointers of a transaction on destruction unless released.
struct Pointers {
  std::vector<std::string> paths;
  std::vector<Fd> fds;  // flock()ed: the writer lives
  bool keep = false;
  ~Pointers() {
    if (keep) return;
    for (const std::string& p : paths) ::unlink(p.c_str());
  }
};

}  // namespace

std::string encode_transaction_pointer(const std::string& host, const std::string& record) {
  return encode_pointer(Pointer{host, record});
}
std::string encode_transaction_record(const TransactionRecord& record) {
  return encode_record(record);
}
const std::string& transaction_host() { return this_host(); }

void recover_transactions(const std::string& target) {
  std::error_code ec;
  const fs::path resolved = fs::canonical(target, ec);
  if (ec) return;
  const std::string t = resolved.string();
  for (const auto& [id, has] : own_files(resolved).by_id) {
    if (has.first) recover_pointer(pointer_path(t, id), id, t);
    if (has.second && !lexists(pointer_path(t, id)))
      remove_finished_record(t + std::string(kTxnTag) + id + std::string(kJournalSuffix), id, t);
  }
}

std::optional<std::string> committed_replacement(const std::string& target) {
  std::error_code ec;
  const fs::path resolved = fs::canonical(target, ec);
  if (ec) return std::nullopt;
  const std::string t = resolved.string();
  for (const auto& [id, has] : own_files(resolved).by_id) {
    if (!has.first) continue;
    const std::string pointer = pointer_path(t, id);
    RecoveryFile file(pointer, t);
    if (file.state() == RecoveryFile::State::kAbsent) continue;
    if (file.state() == RecoveryFile::State::kRefused) {
      note_recovery(pointer + " is " + file.refusal() +
                    ", not a pointer Jask wrote; it was ignored");
      continue;
    }
    const PointerState s = inspect(file, id, t);
    if (s.kind == PointerState::kUntrusted) note_recovery(pointer + " was ignored: " + s.fault);
    if (s.kind != PointerState::kCommitted) continue;  // the old values stand
    const std::string temp = t + std::string(kTxnTag) + id;
    struct stat st {};
    if (::lstat(temp.c_str(), &st) != 0) return std::nullopt;  // renamed in: the target is new
    if (!S_ISREG(st.st_mode)) {
      note_recovery(temp + " is " + file_kind(st.st_mode) +
                    ", not the regular file update_tree_ writes; it was ignored");
      return std::nullopt;
    }
    if (const std::string why = untrusted_owner(st.st_uid, t); !why.empty()) {
      note_recovery(temp + " was ignored: " + why);
      return std::nullopt;
    }
    if (!file.held_by_writer()) {
      note_recovery(t + ": a jask.update_tree_ that did not finish committed its new values to " +
                    temp + " (record " + s.pointer.record +
                    "); this read-only open reads them from there without renaming anything. "
                    "Open the file with mode=\"r+\" to finish the update");
    }
    return temp;
  }
  return std::nullopt;
}

void replace_all(const std::vector<ArrayUpdate>& updates) {
  std::map<SharedFile*, size_t> first_of;
  for (size_t i = 0; i < updates.size(); ++i) {
    const ArrayRef& t = updates[i].target;
    if (!t->writable()) {
      throw ReadOnlyError("cannot update " + updates[i].name + " (" + t->path() +
                          "): it was opened read-only (open it with mode=\"r+\")");
    }
    auto [it, fresh] = first_of.emplace(t->shared_file().get(), i);
    if (!fresh) {
      throw ValueError("update_tree_: " + updates[it->second].name + " and " + updates[i].name +
                       " are arrays of one file, " + t->path() +
                       "; each file can be updated once per update_tree_ (update the file's "
                       "whole array instead of its views)");
    }
  }
  // Every file's updates stopped for the whole step, in one order (no two
  // update_tree_ calls wait on each other).
  std::vector<std::unique_lock<std::mutex>> held;
  for (const auto& [shared, i] : first_of) held.emplace_back(shared->replacing);

  const std::string suffix = std::string(kTxnTag) + new_txn_id();
  std::vector<size_t> durable;
  for (size_t i = 0; i < updates.size(); ++i) {
    if (updates[i].target->is_scratch()) continue;
    const std::string& path = updates[i].target->shared_file()->path();
    remove_stale_replacements(path);
    recover_transactions(path);
    recover_journal(path);  // its copy must start from the file's latest bytes
    durable.push_back(i);
  }
  // One durable file needs no record: its rename is the commit.
  const bool journaled = durable.size() > 1;
  std::string journal;
  Pointers pointers;
  if (journaled) {
    std::error_code ec;
    std::vector<std::string> resolved;
    for (size_t i : durable) {
      resolved.push_back(fs::canonical(updates[i].target->shared_file()->path(), ec).string());
      if (ec) throw IoError("cannot update " + updates[i].target->path() + ": " + ec.message());
    }
    journal = resolved[0] + suffix + std::string(kJournalSuffix);
    for (const std::string& r : resolved) {
      const std::string p = r + suffix + std::string(kPointerSuffix);
      pointers.paths.push_back(p);
      pointers.fds.push_back(
          write_new_file(p, encode_pointer(Pointer{this_host(), journal}), /*lock=*/true));
      // A recovery that found it empty and unlocked (before our flock) took
      // it for a dead writer's and removed it: the step cannot go on.
      struct stat open_st {};
      struct stat path_st {};
      if (::fstat(pointers.fds.back().fd, &open_st) != 0 || ::lstat(p.c_str(), &path_st) != 0 ||
          open_st.st_ino != path_st.st_ino || open_st.st_dev != path_st.st_dev) {
        throw IoError("update_tree_: its pointer file " + p +
                      " was removed by another process's recovery as it was made; nothing was "
                      "changed: call update_tree_ again");
      }
    }
  }

  std::vector<std::unique_ptr<ReplacementFile>> staged(updates.size());
  std::set<std::string> folders;
  for (size_t i = 0; i < updates.size(); ++i) {
    const ArrayUpdate& u = updates[i];
    staged[i] = u.target->stage_data(u.write_data, journaled ? suffix : "");
    if (!u.target->is_scratch()) {
      staged[i]->sync();
      folders.insert(folder_of(staged[i]->resolved()));
    }
  }
  if (journaled) {
    for (const std::string& f : folders) sync_directory(f);
    Record record{suffix.substr(kTxnTag.size()), this_host(), static_cast<int>(::getpid()), {}};
    for (size_t i : durable)
      record.pairs.emplace_back(staged[i]->temp_path(), staged[i]->resolved());
    const std::string part = journal + std::string(kPartSuffix);
    try {
      write_new_file(part, encode_record(record));
      if (::rename(part.c_str(), journal.c_str()) != 0)
        throw IoError(errno_message("rename", part, errno));
    } catch (...) {
      ::unlink(part.c_str());
      throw;
    }
    // Committed: from here on recovery renames what this process does not.
    pointers.keep = true;
    for (size_t i : durable) staged[i]->keep_on_disk();
    sync_directory(folder_of(journal));
    crash_if("update_tree_committed");
  }
  for (size_t i = 0; i < updates.size(); ++i) {
    updates[i].target->shared_file()->commit_replacement(*staged[i]);
    if (journaled) crash_if("update_tree_renamed_one");
  }
  for (const std::string& f : folders) sync_directory(f);
  if (journaled) {
    ::unlink(journal.c_str());
    pointers.keep = false;  // removed now; their locks go with their descriptors
  }
}

}  // namespace jask
