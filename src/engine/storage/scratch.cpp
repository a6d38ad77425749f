#include "storage/scratch.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "base/errors.hpp"

namespace fs = std::filesystem;

namespace jask {
namespace {

constexpr const char* kLockName = ".lock";
constexpr const char* kFolderPrefix = "proc-";
constexpr const char* kStagingPrefix = ".staging-";

// A descriptor closed at scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  explicit operator bool() const { return fd >= 0; }
};

// The id ("<pid>-<random>") a Jask folder is named by, after its prefix; empty
// for any other name.
std::string folder_id(const std::string& name) {
  for (const char* prefix : {kFolderPrefix, kStagingPrefix}) {
    if (name.rfind(prefix, 0) == 0) return name.substr(std::strlen(prefix));
  }
  return "";
}

// True when `fd` (opened without following symlinks) is a regular file owned
// by us whose contents are exactly `expected`.
bool holds_exactly(int fd, const std::string& expected) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      static_cast<uint64_t>(st.st_size) != expected.size()) {
    return false;
  }
  std::string got(expected.size(), '\0');
  return ::pread(fd, got.data(), got.size(), 0) == static_cast<ssize_t>(got.size()) &&
         got == expected;
}

// Opens `name` in `root_fd` when it is a real folder (not a symlink), ours,
// holding the marker Jask wrote at its creation; -1 otherwise. A folder of the
// user's that happens to be named like Jask's never passes.
int open_marked_folder(int root_fd, const std::string& name) {
  const std::string id = folder_id(name);
  if (id.empty()) return -1;
  Fd dir(::openat(root_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return -1;
  struct stat st;
  if (::fstat(dir.fd, &st) != 0 || st.st_uid != ::geteuid()) return -1;
  Fd marker(::openat(dir.fd, kScratchMarkerName,
                     O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!marker || !holds_exactly(marker.fd, scratch_marker_text(id))) return -1;
  int fd = dir.fd;
  dir.fd = -1;
  return fd;
}

// Removes a marked folder `name` of `root_fd`: the files in it (a symlink is
// removed, never followed; Jask makes no subfolders, so a subfolder stays and
// with it the folder), the marker last, then the folder. True if it is gone.
bool remove_marked_folder(int root_fd, const std::string& name) {
  Fd dir(open_marked_folder(root_fd, name));
  if (!dir) return false;
  DIR* listing = ::fdopendir(::dup(dir.fd));
  if (listing == nullptr) return false;
  std::vector<std::string> files;
  while (const dirent* e = ::readdir(listing)) {
    const std::string entry = e->d_name;
    if (entry == "." || entry == ".." || entry == kScratchMarkerName) continue;
    struct stat st;
    if (::fstatat(dir.fd, entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
      files.push_back(entry);
    }
  }
  ::closedir(listing);
  for (const std::string& f : files) ::unlinkat(dir.fd, f.c_str(), 0);
  ::unlinkat(dir.fd, kScratchMarkerName, 0);
  return ::unlinkat(root_fd, name.c_str(), AT_REMOVEDIR) == 0;
}

// Removes the marked folder at `dir` (this process's own, at shutdown).
void remove_marked_folder(const fs::path& dir) {
  Fd root(::open(dir.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root) remove_marked_folder(root.fd, dir.filename().string());
}

// Takes the lock of a marked sibling folder; success means its owner is gone.
bool folder_is_abandoned(int dir_fd) {
  Fd lock(::openat(dir_fd, kLockName, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!lock) return errno == ENOENT;  // a folder without a lock never belonged to a live process
  return ::flock(lock.fd, LOCK_EX | LOCK_NB) == 0;
}

// A staging folder (named ".staging-<pid>-<suffix>") whose process is gone.
bool staging_is_abandoned(const std::string& name) {
  long pid = std::strtol(name.c_str() + std::strlen(kStagingPrefix), nullptr, 10);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// Removes the folders of dead processes in `root`: only folders carrying the
// marker Jask writes at creation, owned by us, never through a symlink.
int reclaim_abandoned(const fs::path& root, const fs::path& own) {
  Fd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) return 0;
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.path() != own && !folder_id(entry.path().filename().string()).empty()) {
      names.push_back(entry.path().filename().string());
    }
  }
  int removed = 0;
  for (const std::string& name : names) {
    bool stale = false;
    {
      Fd dir(open_marked_folder(root_fd.fd, name));
      if (!dir) continue;
      stale = name.rfind(kFolderPrefix, 0) == 0 ? folder_is_abandoned(dir.fd)
                                                : staging_is_abandoned(name);
    }
    if (stale && remove_marked_folder(root_fd.fd, name)) ++removed;
  }
  return removed;
}

// Creates `root` and its missing parents, each 0700 whatever the umask. A
// folder that exists is left as it is (it may be the user's).
void create_root(const fs::path& root) {
  std::error_code ec;
  if (fs::is_directory(root, ec)) return;
  if (root.has_parent_path() && root.parent_path() != root) create_root(root.parent_path());
  if (::mkdir(root.c_str(), 0700) != 0) {
    if (errno == EEXIST && fs::is_directory(root, ec)) return;  // made meanwhile
    throw IoError("cannot create scratch folder: " + errno_message("mkdir", root.string(), errno));
  }
  if (::chmod(root.c_str(), 0700) != 0) {
    throw IoError(errno_message("chmod", root.string(), errno));
  }
}

// Writes a new file `name` in `dir_fd` holding `text` (O_EXCL: never an
// existing file or a symlink), mode 0600.
void write_new_file(int dir_fd, const fs::path& dir, const char* name, const std::string& text) {
  const std::string path = (dir / name).string();
  Fd fd(::openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) throw IoError(errno_message("open", path, errno));
  if (::write(fd.fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    throw IoError(errno_message("write", path, errno));
  }
}

// Makes the folder `staging` of id `id` (mkdir fails on an existing name, so
// it is ours alone), 0700, with its marker and its lock file; returns the
// lock's descriptor, locked. On failure nothing is left behind.
int make_locked_folder(const fs::path& staging, const std::string& id) {
  if (::mkdir(staging.c_str(), 0700) != 0) {
    throw IoError("cannot create scratch folder: " +
                  errno_message("mkdir", staging.string(), errno));
  }
  Fd dir(::open(staging.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  const std::string lock_path = (staging / kLockName).string();
  try {
    if (!dir) throw IoError(errno_message("open", staging.string(), errno));
    if (::fchmod(dir.fd, 0700) != 0) throw IoError(errno_message("chmod", staging.string(), errno));
    write_new_file(dir.fd, staging, kScratchMarkerName, scratch_marker_text(id));
    Fd lock(::openat(dir.fd, kLockName, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!lock) throw IoError(errno_message("open", lock_path, errno));
    if (::flock(lock.fd, LOCK_EX | LOCK_NB) != 0) {
      throw IoError(errno_message("flock", lock_path, errno));
    }
    const int fd = lock.fd;
    lock.fd = -1;
    return fd;
  } catch (...) {
    if (dir) {
      ::unlinkat(dir.fd, kLockName, 0);
      ::unlinkat(dir.fd, kScratchMarkerName, 0);
    }
    ::rmdir(staging.c_str());
    throw;
  }
}

// True for a folder named by this process's pid (not a forked parent's).
bool made_by_this_process(const std::string& dir) {
  const std::string id = folder_id(fs::path(dir).filename().string());
  return id.rfind(std::to_string(::getpid()) + "-", 0) == 0;
}

std::string random_suffix() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> dist;
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(dist(rd)));
  return std::string(buf, 8);
}

}  // namespace

std::string scratch_marker_text(const std::string& id) {
  return "Jask scratch folder " + id + ": removed by Jask when its process is gone\n";
}

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
  if (root.empty()) {
    throw ValueError(
        "the scratch folder is \"\": name a folder (it would otherwise be the "
        "current one, holding the user's files)");
  }
  const fs::path abs_root = fs::absolute(root);
  create_root(abs_root);
  if (!allow_tmpfs && is_ram_backed(root)) {
    throw ValueError("scratch folder " + root +
                     " is on a RAM-backed file system (tmpfs/ramfs): arrays written there "
                     "would occupy memory, defeating the memory budget. Choose a folder on "
                     "disk with set_memory_budget(..., scratch_dir=...), or opt in with "
                     "allow_tmpfs=True");
  }
  if (!dir_.empty() && fs::path(root_) == abs_root) return;  // already there
  // Build, mark and lock the folder under a name other processes reclaim only
  // once we are dead, then rename it into place: a "proc-" folder always has a
  // held lock, so no starting process can mistake it for an abandoned one.
  const std::string id = std::to_string(::getpid()) + "-" + random_suffix();
  const fs::path staging = abs_root / (kStagingPrefix + id);
  const fs::path dir = abs_root / (kFolderPrefix + id);
  const int fd = make_locked_folder(staging, id);
  std::error_code ec;
  fs::rename(staging, dir, ec);
  if (ec) {
    ::close(fd);
    remove_marked_folder(staging);
    throw IoError("cannot rename scratch folder to " + dir.string() + ": " + ec.message());
  }
  if (!dir_.empty()) {
    retired_.emplace_back(dir_, lock_fd_);
    for (const auto& hook : on_change_) hook();
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
  // A forked child inherits its parent's folders (named by the parent's pid):
  // they stay.
  if (!dir_.empty()) retired_.emplace_back(dir_, lock_fd_);
  for (auto& [dir, fd] : retired_) {
    if (made_by_this_process(dir)) remove_marked_folder(fs::path(dir));
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
  if (made_by_this_process(dir_)) {
    for (const auto& hook : on_change_) hook();
  }
  remove_all_locked();
}

}  // namespace jask
