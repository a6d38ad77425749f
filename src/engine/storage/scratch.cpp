#include "storage/scratch.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "base/errors.hpp"

namespace fs = std::filesystem;

namespace jask {
namespace {

constexpr const char* kLockName = ".lock";
constexpr const char* kFolderPrefix = "proc-";

// Takes the lock of a sibling folder; success means its owner is gone.
bool folder_is_abandoned(const fs::path& dir) {
  int fd = ::open((dir / kLockName).c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;  // a folder without a lock never belonged to a live process
  bool abandoned = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return abandoned;
}

constexpr const char* kStagingPrefix = ".staging-";

// A staging folder (named ".staging-<pid>-<suffix>") whose process is gone.
bool staging_is_abandoned(const std::string& name) {
  long pid = std::strtol(name.c_str() + std::strlen(kStagingPrefix), nullptr, 10);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

int reclaim_abandoned(const fs::path& root, const fs::path& own) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const fs::path& p = entry.path();
    if (!entry.is_directory() || p == own) continue;
    const std::string name = p.filename().string();
    bool stale = name.rfind(kFolderPrefix, 0) == 0
                     ? folder_is_abandoned(p)
                     : name.rfind(kStagingPrefix, 0) == 0 && staging_is_abandoned(name);
    if (stale) {
      fs::remove_all(p, ec);
      if (!ec) ++removed;
    }
  }
  return removed;
}

std::string random_suffix() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> dist;
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(dist(rd)));
  return std::string(buf, 8);
}

}  // namespace

bool is_ram_backed(const std::string& path) {
  struct statfs st;
  if (::statfs(path.c_str(), &st) != 0) throw IoError(errno_message("statfs", path, errno));
  return st.f_type == TMPFS_MAGIC || st.f_type == RAMFS_MAGIC;
}

Scratch& Scratch::instance() {
  static Scratch scratch;
  return scratch;
}

void Scratch::configure(const std::string& root, bool allow_tmpfs) {
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw IoError("cannot create scratch folder " + root + ": " + ec.message());
  if (!allow_tmpfs && is_ram_backed(root)) {
    throw ValueError("scratch folder " + root +
                     " is on a RAM-backed file system (tmpfs/ramfs): arrays written there "
                     "would occupy memory, defeating the memory budget. Choose a folder on "
                     "disk with set_memory_budget(..., scratch_dir=...), or opt in with "
                     "allow_tmpfs=True");
  }
  fs::path abs_root = fs::absolute(root);
  if (!dir_.empty() && fs::path(root_) == abs_root) return;  // already there
  if (!dir_.empty()) {
    retired_.emplace_back(dir_, lock_fd_);
    for (const auto& hook : on_change_) hook();
  }
  // Build and lock the folder under a name other processes ignore, then
  // rename it into place: a "proc-" folder always has a held lock, so no
  // starting process can mistake it for an abandoned one.
  const std::string name = std::to_string(::getpid()) + "-" + random_suffix();
  fs::path staging = abs_root / (kStagingPrefix + name);
  fs::path dir = abs_root / (kFolderPrefix + name);
  fs::create_directory(staging, ec);
  if (ec) throw IoError("cannot create scratch folder " + staging.string() + ": " + ec.message());
  fs::permissions(staging, fs::perms::owner_all, ec);
  int fd = ::open((staging / kLockName).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw IoError(errno_message("open", (staging / kLockName).string(), errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    throw IoError(errno_message("flock", (staging / kLockName).string(), errno));
  }
  fs::rename(staging, dir, ec);
  if (ec) {
    ::close(fd);
    throw IoError("cannot rename scratch folder to " + dir.string() + ": " + ec.message());
  }
  root_ = abs_root.string();
  dir_ = dir.string();
  lock_fd_ = fd;
  reclaimed_ = reclaim_abandoned(abs_root, dir);
}

bool Scratch::configured() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !dir_.empty();
}

std::string Scratch::root() const {
  std::lock_guard<std::mutex> lock(mu_);
  return root_;
}

std::string Scratch::process_dir() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dir_;
}

std::string Scratch::new_file_path(const std::string& tag) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dir_.empty()) throw ValueError("scratch space is not configured");
  // The tag names the op for people looking at the folder; fused ops have
  // long names, and a file name has at most 255 bytes.
  constexpr size_t kMaxTag = 64;
  std::string name = tag.substr(0, kMaxTag);
  for (char& c : name) {
    if (c == '/' || c == '\0') c = '_';
  }
  return dir_ + "/" + name + "-" + std::to_string(++counter_) + ".npy";
}

void Scratch::remove_all_locked() {
  // Files still referenced keep their descriptors open; unlinking the folder
  // is safe on POSIX and frees the space when the last descriptor closes.
  if (!dir_.empty()) retired_.emplace_back(dir_, lock_fd_);
  std::error_code ec;
  for (auto& [dir, fd] : retired_) {
    fs::remove_all(dir, ec);
    if (fd >= 0) ::close(fd);
  }
  retired_.clear();
  lock_fd_ = -1;
  dir_.clear();
  root_.clear();
}

void Scratch::on_folder_change(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  on_change_.push_back(std::move(hook));
}

void Scratch::shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& hook : on_change_) hook();
  remove_all_locked();
}

}  // namespace jask
