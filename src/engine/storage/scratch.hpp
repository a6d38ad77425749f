// Scratch space: one folder per process under a root, holding the files of
// op outputs and gradients. A process holds an flock on its folder's lock
// file for its whole life, so a folder whose lock can be taken belongs to a
// dead process and is removed at the next start. Only folders Jask made are
// ever removed: each carries a marker file written at its creation (the name
// alone proves nothing: the root may be a folder of the user's).
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace jask {

class Scratch {
 public:
  static Scratch& instance();

  // Points scratch at `root` (created 0700 if missing; "" is a ValueError).
  // Refuses RAM-backed file systems unless allow_tmpfs. Reclaims folders of
  // dead processes: marked, owned by this user, never through a symlink.
  void configure(const std::string& root, bool allow_tmpfs);
  bool configured() const;
  std::string root() const;
  std::string process_dir() const;

  // A fresh, unique file path inside this process's folder.
  std::string new_file_path(const std::string& tag);

  // Removes this process's folder (at exit; in a forked child, not the parent's).
  void shutdown();

  // Runs `hook` before this process's folder moves (configure() with another
  // root) or goes (shutdown()): the scratch pool, a policy on top of scratch,
  // drops the files it keeps there.
  void on_folder_change(std::function<void()> hook);

  // Number of folders of dead processes removed by the last configure().
  int reclaimed_folders() const { return reclaimed_; }

 private:
  Scratch() = default;
  void remove_all_locked();
  mutable std::mutex mu_;
  // Folders of earlier configure() calls: arrays may still live there, so
  // they are kept (locked) until shutdown.
  std::vector<std::pair<std::string, int>> retired_;
  std::vector<std::function<void()>> on_change_;
  std::string root_;
  std::string dir_;
  int lock_fd_ = -1;
  uint64_t counter_ = 0;
  int reclaimed_ = 0;
};

// The marker file in every folder Jask makes under a scratch root, and its
// exact contents for the folder of id "<pid>-<random>" (named proc-<id> or
// .staging-<id>).
inline constexpr const char* kScratchMarkerName = ".jask-scratch";
std::string scratch_marker_text(const std::string& id);

// True when `path` lives on tmpfs or ramfs (memory, not disk).
bool is_ram_backed(const std::string& path);

}  // namespace jask
