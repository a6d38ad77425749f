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
constexpr std::string_view kJournalMagic = "jask-txn 1\n";

std::string new_txn_id() {
  std::random_device rd;
  char buf[24];
  std::snprintf(buf, sizeof buf, "%d-%08x%08x", static_cast<int>(::getpid()),
                static_cast<unsigned>(rd()), static_cast<unsigned>(rd()));
  return buf;
}

bool exists(const std::string& path) {
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

std::string read_all(int fd, const std::string& path) {
  std::string out;
  char buf[4096];
  for (off_t at = 0;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_message("read", path, errno));
    }
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    at += n;
  }
}

// A new private file holding `contents`, flushed to disk; flock()ed first
// when `lock` (a pointer file: its lock says its writer lives).
Fd write_new_file(const std::string& path, std::string_view contents, bool lock = false) {
  Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.fd < 0) throw IoError(errno_message("open", path, errno));
  if (lock) ::flock(fd.fd, LOCK_EX);
  write_all(fd.fd, contents, path);
  if (::fdatasync(fd.fd) != 0) throw IoError(errno_message("fdatasync", path, errno));
  return fd;
}

// The writer of a pointer file <target>.jask-txn-<pid>-<hex>.ptr is alive.
bool writer_alive(const std::string& pointer) {
  const size_t at = pointer.rfind(kTxnTag);
  if (at == std::string::npos) return false;
  const pid_t pid = static_cast<pid_t>(std::atol(pointer.c_str() + at + kTxnTag.size()));
  return pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH);
}

std::string folder_of(const std::string& path) { return fs::path(path).parent_path().string(); }

// The record: (new file, target) pairs, each path as <length>:<bytes>.
std::string encode(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::string out(kJournalMagic);
  for (const auto& [temp, target] : pairs) {
    for (const std::string& p : {temp, target}) out += std::to_string(p.size()) + ":" + p;
    out += "\n";
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> decode(std::string_view text,
                                                        const std::string& journal) {
  auto malformed = [&] { return IoError(journal + ": malformed jask commit record"); };
  if (text.substr(0, kJournalMagic.size()) != kJournalMagic) throw malformed();
  text.remove_prefix(kJournalMagic.size());
  auto next_path = [&] {
    size_t colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon > 18) throw malformed();
    size_t n = 0;
    for (char c : text.substr(0, colon)) {
      if (c < '0' || c > '9') throw malformed();
      n = n * 10 + static_cast<size_t>(c - '0');
    }
    if (text.size() < colon + 1 + n) throw malformed();
    std::string path(text.substr(colon + 1, n));
    text.remove_prefix(colon + 1 + n);
    return path;
  };
  std::vector<std::pair<std::string, std::string>> pairs;
  while (!text.empty()) {
    std::string temp = next_path();
    std::string target = next_path();
    if (text.empty() || text.front() != '\n') throw malformed();
    text.remove_prefix(1);
    pairs.emplace_back(std::move(temp), std::move(target));
  }
  return pairs;
}

// Redoes step 3 of a committed transaction (see transaction.hpp).
void roll_forward(const std::string& journal) {
  Fd fd(::open(journal.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) {
    if (errno == ENOENT) return;  // finished by another recovery
    throw IoError(errno_message("open", journal, errno));
  }
  const auto pairs = decode(read_all(fd.fd, journal), journal);
  std::set<std::string> folders;
  for (const auto& [temp, target] : pairs) {
    if (::rename(temp.c_str(), target.c_str()) != 0 && errno != ENOENT) {
      const int err = errno;
      throw IoError("cannot finish the update of " + target + ": jask.update_tree_ committed it (" +
                    journal + ") but its process died before renaming " + temp + " over it (" +
                    std::strerror(err) + "). Open one of its arrays as a user who may write to " +
                    folder_of(target) + " to finish it");
    }
    folders.insert(folder_of(target));
  }
  for (const std::string& f : folders) sync_directory(f);
  ::unlink(journal.c_str());
  for (const auto& [temp, target] : pairs) ::unlink((temp + std::string(kPointerSuffix)).c_str());
}

// One pointer file of a transaction that may have no live writer.
void recover_pointer(const std::string& pointer) {
  Fd fd(::open(pointer.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return;  // gone: finished
  if (::flock(fd.fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return;
    // A live writer. Committed: its renames are under way, and a reader must
    // not see some done and some not, so wait for them (they are brief).
    if (!exists(read_all(fd.fd, pointer))) return;
    while (::flock(fd.fd, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  if (!exists(pointer)) return;  // its writer finished
  const std::string journal = read_all(fd.fd, pointer);
  if (journal.empty()) {
    // Created, not yet written (its writer waits for this lock), or its
    // writer died then: the step was not committed.
    if (!writer_alive(pointer)) ::unlink(pointer.c_str());
    return;
  }
  if (exists(journal)) return roll_forward(journal);
  // Never committed: the new file goes (the target kept its old values).
  const std::string temp = pointer.substr(0, pointer.size() - kPointerSuffix.size());
  ::unlink(temp.c_str());
  ::unlink((journal + ".part").c_str());
  ::unlink(pointer.c_str());
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

void recover_transactions(const std::string& target) {
  std::error_code ec;
  fs::path resolved = fs::canonical(target, ec);
  if (ec) return;
  const std::string prefix = resolved.filename().string() + std::string(kTxnTag);
  std::vector<std::string> pointers;
  for (fs::directory_iterator it(resolved.parent_path(), ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() > kPointerSuffix.size() &&
        name.compare(name.size() - kPointerSuffix.size(), kPointerSuffix.size(), kPointerSuffix) ==
            0)
      pointers.push_back(it->path().string());
  }
  for (const std::string& p : pointers) recover_pointer(p);
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
      pointers.fds.push_back(write_new_file(p, journal, /*lock=*/true));
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
    std::vector<std::pair<std::string, std::string>> pairs;
    for (size_t i : durable) pairs.emplace_back(staged[i]->temp_path(), staged[i]->resolved());
    const std::string part = journal + ".part";
    try {
      write_new_file(part, encode(pairs));
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
